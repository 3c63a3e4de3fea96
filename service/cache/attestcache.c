/* attestcache: a 4-way set-associative table of (key, rendered attestation) blocks, one
 * allocation each; a full set evicts in rotation. A key is compared in full, never by its hash
 * alone, so two attestations never share an entry. */
#include "cache/attestcache.h"

#include <stdlib.h>
#include <string.h>

#include "cache/ways.h"

typedef struct entry {
    uint64_t hash;
    char *block; /* key bytes, then the value's */
    size_t key_len, val_len;
} entry;

struct attestcache {
    ways w;
    uint64_t hits, misses;
};

attestcache *attestcache_new(size_t entries)
{
    attestcache *c = calloc(1, sizeof *c);
    if (c && ways_init(&c->w, entries, sizeof(entry)) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void attestcache_free(attestcache *c)
{
    if (!c)
        return;
    entry *slots = c->w.slots;
    for (size_t i = 0; i < c->w.sets * WAYS_PER_SET; i++)
        free(slots[i].block);
    ways_deinit(&c->w);
    free(c);
}

/* FNV-1a, 64 bits: keys are a few hundred bytes the service built, not chosen by a caller
 * beyond the names an admin wrote; a crafted collision only shares a set. */
static uint64_t hash_of(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static entry *find(attestcache *c, uint64_t h, const void *key, size_t key_len, entry **set)
{
    *set = ways_set(&c->w, h ^ (h >> 32));
    for (int i = 0; i < WAYS_PER_SET; i++) {
        entry *e = &(*set)[i];
        if (e->block && e->hash == h && e->key_len == key_len && !memcmp(e->block, key, key_len))
            return e;
    }
    return NULL;
}

const char *attestcache_get(attestcache *c, const void *key, size_t key_len, size_t *len)
{
    if (!c->w.sets) {
        c->misses++;
        return NULL;
    }
    entry *set, *e = find(c, hash_of(key, key_len), key, key_len, &set);
    if (!e) {
        c->misses++;
        return NULL;
    }
    c->hits++;
    *len = e->val_len;
    return e->block + e->key_len;
}

void attestcache_put(attestcache *c, const void *key, size_t key_len, const char *val, size_t len)
{
    if (!c->w.sets)
        return;
    uint64_t h = hash_of(key, key_len);
    entry *set, *e = find(c, h, key, key_len, &set);
    if (!e) {
        e = &set[ways_rotate(&c->w)];
        for (int i = 0; i < WAYS_PER_SET; i++)
            if (!set[i].block) {
                e = &set[i];
                break;
            }
    }
    char *block = malloc(key_len + len);
    if (!block)
        return;
    memcpy(block, key, key_len);
    memcpy(block + key_len, val, len);
    free(e->block);
    *e = (entry){h, block, key_len, len};
}

uint64_t attestcache_hits(const attestcache *c)
{
    return c->hits;
}

uint64_t attestcache_misses(const attestcache *c)
{
    return c->misses;
}
