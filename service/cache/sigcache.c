/* sigcache: a 4-way set-associative table; a full set evicts its oldest epoch first. Entries
 * carry the epoch of the message they were verified against, so an expired one never matches:
 * callers look up only the epochs still accepted. */
#include "cache/sigcache.h"

#include <stdlib.h>
#include <string.h>

#include "cache/ways.h"

typedef struct entry {
    uint8_t sig[65];
    uint8_t addr[20];
    uint8_t used;
    int64_t epoch;
} entry;

struct sigcache {
    ways w;
    uint64_t hits;
};

sigcache *sigcache_new(size_t entries)
{
    sigcache *c = calloc(1, sizeof *c);
    if (c && ways_init(&c->w, entries, sizeof(entry)) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void sigcache_free(sigcache *c)
{
    if (!c)
        return;
    ways_deinit(&c->w);
    free(c);
}

static entry *set_of(sigcache *c, const uint8_t sig[65], int64_t epoch)
{
    /* r is uniformly random for real signatures; an attacker choosing r only hurts its set. */
    uint64_t h;
    memcpy(&h, sig + 8, sizeof h);
    h ^= (uint64_t)epoch * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
    return ways_set(&c->w, h);
}

bool sigcache_get(sigcache *c, const uint8_t sig[65], int64_t epoch, uint8_t addr[20])
{
    if (!c->w.sets)
        return false;
    entry *set = set_of(c, sig, epoch);
    for (int i = 0; i < WAYS_PER_SET; i++)
        if (set[i].used && set[i].epoch == epoch && !memcmp(set[i].sig, sig, 65)) {
            memcpy(addr, set[i].addr, 20);
            c->hits++;
            return true;
        }
    return false;
}

void sigcache_put(sigcache *c, const uint8_t sig[65], int64_t epoch, const uint8_t addr[20])
{
    if (!c->w.sets)
        return;
    entry *set = set_of(c, sig, epoch);
    /* Oldest epoch first; among equals, the rotating way. */
    entry *victim = &set[ways_rotate(&c->w)];
    for (int i = 0; i < WAYS_PER_SET; i++) {
        if (!set[i].used || (set[i].epoch == epoch && !memcmp(set[i].sig, sig, 65))) {
            victim = &set[i];
            break;
        }
        if (set[i].epoch < victim->epoch)
            victim = &set[i];
    }
    memcpy(victim->sig, sig, 65);
    memcpy(victim->addr, addr, 20);
    victim->epoch = epoch;
    victim->used = 1;
}

uint64_t sigcache_hits(const sigcache *c)
{
    return c->hits;
}
