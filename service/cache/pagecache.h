/* pagecache: rendered users pages kept in memory, each under the version of the member list it
 * was rendered from. The cache never decides freshness itself: a reader fetches the current
 * version in the same transaction as its role checks and takes the page only when the versions
 * match (resources/members.c), so a page is never older than the data a direct read would see.
 *
 * Direct-mapped: a key hashes to one slot and a new page replaces whatever was there, so memory
 * is bounded by slots * max_body and every operation is O(1) with no eviction bookkeeping. Loop
 * thread only. */
#ifndef ENTITYD_PAGECACHE_H
#define ENTITYD_PAGECACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include <stdint.h>

/* The largest page kept: a page of 100 members is about 17 KiB. */
#define PAGECACHE_MAX_BODY (64 * 1024)

typedef struct pagecache pagecache;

typedef struct pagecache_stats {
    uint64_t hits, misses, stale, stored;
} pagecache_stats;

/* NULL when slots is 0 (the cache is off) or memory is short; every function accepts NULL. */
pagecache *pagecache_new(size_t slots, size_t max_body);
void pagecache_free(pagecache *pc);

/* The body stored under key when its version is `version`; NULL otherwise (counted as a miss,
 * or as stale when the key is there under another version). The pointer is the cache's and
 * stays valid until the next pagecache_put or pagecache_free. */
const char *pagecache_get(pagecache *pc, const char *key, size_t klen, const char *version,
                          size_t vlen, size_t *body_len);
/* Before a read: true when a page is stored under key, whatever its version (the reader then
 * asks Redis only for the version); false is counted as a miss. */
bool pagecache_lookup(pagecache *pc, const char *key, size_t klen);
/* Stores a copy of body under key and version, replacing the slot's page. Bodies over max_body
 * are not kept. */
void pagecache_put(pagecache *pc, const char *key, size_t klen, const char *version, size_t vlen,
                   const char *body, size_t blen);

pagecache_stats pagecache_get_stats(const pagecache *pc);
/* A metrics source (core/metrics.h); ctx is the cache, NULL when there is none. */
void pagecache_render_metrics(buf *out, void *ctx);

#endif
