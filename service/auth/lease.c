/* lease: the table of write-budget leases (chained hash over a fixed array of leases). */
#include "auth/lease.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

int lease_table_init(lease_table *t, size_t cap)
{
    memset(t, 0, sizeof *t);
    t->free_head = -1;
    if (cap == 0 || cap > INT32_MAX / 2)
        return -1;
    t->nbuckets = 1;
    while (t->nbuckets < cap)
        t->nbuckets <<= 1;
    /* calloc: large blocks come zeroed from the kernel and cost memory only once written. */
    t->slots = calloc(cap, sizeof *t->slots);
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
    if (!t->slots || !t->buckets) {
        lease_table_deinit(t);
        return -1;
    }
    t->cap = cap;
    return 0;
}

void lease_table_deinit(lease_table *t)
{
    free(t->slots);
    free(t->buckets);
    memset(t, 0, sizeof *t);
    t->free_head = -1;
}

lease *lease_find(lease_table *t, const char *address)
{
    if (!t->buckets)
        return NULL;
    uint32_t i = t->buckets[hash(address) & (t->nbuckets - 1)];
    for (int32_t at = (int32_t)i - 1; at >= 0; at = t->slots[at].next)
        if (!strcmp(t->slots[at].address, address))
            return &t->slots[at];
    return NULL;
}

lease *lease_add(lease_table *t, const char *address)
{
    if (strlen(address) >= LEASE_ADDRESS_SIZE)
        return NULL;
    int32_t at;
    if (t->free_head >= 0) {
        at = t->free_head;
        t->free_head = t->slots[at].next;
    } else if (t->high < t->cap) {
        at = (int32_t)t->high++;
    } else {
        return NULL;
    }
    lease *l = &t->slots[at];
    memset(l, 0, sizeof *l);
    strcpy(l->address, address);
    l->used = true;
    l->size = 1;
    uint32_t *b = &t->buckets[hash(address) & (t->nbuckets - 1)];
    l->next = (int32_t)*b - 1;
    *b = (uint32_t)at + 1;
    t->count++;
    return l;
}

void lease_remove(lease_table *t, lease *l)
{
    int32_t at = (int32_t)(l - t->slots);
    uint32_t *b = &t->buckets[hash(l->address) & (t->nbuckets - 1)];
    if ((int32_t)*b - 1 == at) {
        *b = (uint32_t)(l->next + 1);
    } else {
        for (int32_t p = (int32_t)*b - 1; p >= 0; p = t->slots[p].next)
            if (t->slots[p].next == at) {
                t->slots[p].next = l->next;
                break;
            }
    }
    l->used = false;
    l->next = t->free_head;
    t->free_head = at;
    t->count--;
}

uint32_t lease_next_size(lease *l, uint64_t now_ms, uint64_t hold_ms, uint32_t cap)
{
    uint64_t since = now_ms - l->charged_ms;
    if (l->charged_ms && since * 4 < hold_ms)
        l->size = l->size > cap / 2 ? cap : l->size * 2;
    else if (!l->charged_ms || since > hold_ms)
        l->size = l->size > 1 ? l->size / 2 : 1;
    if (l->size > cap)
        l->size = cap;
    if (l->size < 1)
        l->size = 1;
    l->charged_ms = now_ms;
    return l->size;
}

uint32_t lease_cap(int64_t per_minute)
{
    int64_t c = per_minute / 16;
    if (c > LEASE_MAX_UNITS)
        c = LEASE_MAX_UNITS;
    return c < 1 ? 1 : (uint32_t)c;
}
