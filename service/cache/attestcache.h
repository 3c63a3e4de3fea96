/* attestcache: a bounded memory of signed attestations, rendered, so a repeated read signs
 * nothing. */
#ifndef ENTITYD_ATTESTCACHE_H
#define ENTITYD_ATTESTCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct attestcache attestcache;

/* A cache of about `entries` attestations (0 makes every lookup miss). NULL on allocation
 * failure. */
attestcache *attestcache_new(size_t entries);
void attestcache_free(attestcache *c);
/* The rendered attestation kept under key (the bytes of every field it signs), and its length;
 * NULL when absent. Valid until the next put. */
const char *attestcache_get(attestcache *c, const void *key, size_t key_len, size_t *len);
/* Keeps a copy of val under a copy of key, evicting an older entry of its set when full.
 * Silently keeps nothing when memory runs out. */
void attestcache_put(attestcache *c, const void *key, size_t key_len, const char *val, size_t len);
/* Lookups answered and missed since start. */
uint64_t attestcache_hits(const attestcache *c);
uint64_t attestcache_misses(const attestcache *c);

#endif
