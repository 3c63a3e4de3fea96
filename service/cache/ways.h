/* ways: the slot array of a set-associative cache (verified signatures, signed attestations):
 * WAYS_PER_SET entries a set and a power of two of sets, so that a hash picks its set with a
 * mask. The owner keeps its own entries and its own rule for which way a full set evicts; the
 * rotating way breaks its ties, so no slot is evicted every time. */
#ifndef ENTITYD_CACHE_WAYS_H
#define ENTITYD_CACHE_WAYS_H

#include <stddef.h>
#include <stdint.h>

#define WAYS_PER_SET 4

typedef struct ways {
    void *slots;
    size_t sets; /* a power of two, or 0: an empty table, every lookup misses */
    size_t entry_size;
    unsigned next_way;
} ways;

/* Sizes w for about `entries` entries of entry_size bytes each, all zero; entries 0 leaves it
 * empty. Returns 0, or -1 out of memory (w empty then). */
int ways_init(ways *w, size_t entries, size_t entry_size);
/* Frees the slots (not what the owner's entries point to). */
void ways_deinit(ways *w);

/* The first of the WAYS_PER_SET entries of the set that h picks (w->sets > 0). */
static inline void *ways_set(const ways *w, uint64_t h)
{
    return (char *)w->slots + (size_t)(h & (w->sets - 1)) * WAYS_PER_SET * w->entry_size;
}

/* The way a full set evicts next, in rotation. */
static inline unsigned ways_rotate(ways *w)
{
    return w->next_way++ % WAYS_PER_SET;
}

#endif
