/* slotset: see slotset.h. */
#include "cache/slotset.h"

#include <stdlib.h>
#include <string.h>

#define MIN_SLOTS  64
#define EVICT_SCAN 64 /* slots one store may empty to stay within the budget */

uint64_t slotset_hash(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

int slotset_init(slotset *s, size_t max_bytes, size_t bytes_per_slot, size_t max_slots)
{
    size_t n = MIN_SLOTS;
    while (n < max_bytes / bytes_per_slot && n < max_slots)
        n <<= 1;
    memset(s, 0, sizeof *s);
    s->slots = calloc(n, sizeof *s->slots);
    if (!s->slots)
        return -1;
    s->nslots = n;
    return 0;
}

void slotset_clear(slotset *s, slotset_drop_fn *drop, void *owner)
{
    for (size_t i = 0; i < s->nslots; i++)
        if (s->slots[i])
            drop(owner, &s->slots[i]);
}

void slotset_fini(slotset *s, slotset_drop_fn *drop, void *owner)
{
    if (!s->slots)
        return;
    slotset_clear(s, drop, owner);
    free(s->slots);
    s->slots = NULL;
    s->nslots = 0;
}

slotset_head **slotset_find(slotset *s, uint64_t hash, const char *key, size_t len,
                            slotset_same_fn *same)
{
    size_t i = hash & (s->nslots - 1);
    for (size_t way = 0; way < 2; way++) {
        slotset_head **slot = &s->slots[i ^ way];
        if (*slot && (*slot)->hash == hash && same(*slot, key, len))
            return slot;
    }
    return NULL;
}

slotset_head **slotset_claim(slotset *s, uint64_t hash, const char *key, size_t len,
                             slotset_same_fn *same, slotset_drop_fn *drop, void *owner)
{
    slotset_head **slot = slotset_find(s, hash, key, len, same);
    if (!slot) {
        size_t i = hash & (s->nslots - 1);
        slotset_head **a = &s->slots[i], **b = &s->slots[i ^ 1];
        slot = !*a ? a : !*b ? b : (*a)->used <= (*b)->used ? a : b;
    }
    if (*slot)
        drop(owner, slot);
    return slot;
}

/* Read through the pointer on every turn: each drop lowers the owner's count. */
static bool over_budget(const size_t *bytes, size_t need, size_t max)
{
    return *bytes + need > max;
}

bool slotset_make_room(slotset *s, const size_t *bytes, size_t need, size_t max,
                       slotset_drop_fn *drop, void *owner)
{
    for (int i = 0; i < EVICT_SCAN && over_budget(bytes, need, max); i++) {
        s->hand = (s->hand + 1) & (s->nslots - 1);
        if (s->slots[s->hand])
            drop(owner, &s->slots[s->hand]);
    }
    return !over_budget(bytes, need, max);
}

void slotset_touch(slotset *s, slotset_head *e)
{
    e->used = ++s->clock;
}
