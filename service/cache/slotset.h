/* slotset: the slot table under the read cache and the find page cache. A power-of-two array
 * of slots taken in pairs: an entry may sit in either slot of the pair its hash names, so two
 * hot entries whose hashes meet do not evict each other on every turn, and a new one replaces
 * the empty or the less recently used of the pair. Over its byte budget, a store empties the
 * slots after a clock hand, a few at a time.
 *
 * The owner allocates and frees the entries; each begins with a slotset_head. The set frees
 * none itself: it calls the owner's drop function, which frees the entry, keeps the owner's
 * accounts and sets the slot to NULL. */
#ifndef ENTITYD_CACHE_SLOTSET_H
#define ENTITYD_CACHE_SLOTSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct slotset_head {
    uint64_t hash; /* slotset_hash() of the entry's key */
    uint64_t used; /* the set's clock at the entry's last hit or fill */
} slotset_head;

typedef struct slotset {
    slotset_head **slots;
    size_t nslots, hand;
    uint64_t clock;
} slotset;

/* Frees *slot's entry, keeps the owner's accounts, sets *slot to NULL. */
typedef void slotset_drop_fn(void *owner, slotset_head **slot);
/* Whether `e` (whose hash matched) holds this key. */
typedef bool slotset_same_fn(const slotset_head *e, const char *key, size_t len);

/* A 64-bit hash of a key, eight bytes a step (keys are a hundred bytes or a few hundred, hashed
 * on every lookup). */
uint64_t slotset_hash(const char *key, size_t len);

/* Slots for a budget: a power of two near max_bytes / bytes_per_slot, at least 64, at most
 * max_slots. 0, or -1 when out of memory. */
int slotset_init(slotset *s, size_t max_bytes, size_t bytes_per_slot, size_t max_slots);
void slotset_fini(slotset *s, slotset_drop_fn *drop, void *owner);
/* Drops every entry. */
void slotset_clear(slotset *s, slotset_drop_fn *drop, void *owner);

/* The slot holding the key, or NULL. */
slotset_head **slotset_find(slotset *s, uint64_t hash, const char *key, size_t len,
                            slotset_same_fn *same);
/* The slot a new entry for the key goes to, emptied: the key's own, else an empty one of its
 * pair, else the one of the pair used longer ago. */
slotset_head **slotset_claim(slotset *s, uint64_t hash, const char *key, size_t len,
                             slotset_same_fn *same, slotset_drop_fn *drop, void *owner);
/* Makes room for `need` more bytes within `max`: empties up to 64 slots after the hand while
 * *bytes (the owner's count, which drop lowers) + need > max. Whether it now fits. A slot
 * slotset_claim() emptied stays empty through it. */
bool slotset_make_room(slotset *s, const size_t *bytes, size_t need, size_t max,
                       slotset_drop_fn *drop, void *owner);
/* Marks the entry used now. */
void slotset_touch(slotset *s, slotset_head *e);

#endif
