/* findcache: rendered find pages (resources/find.c: a wallet's entities, the directory, its search)
 * kept in the process, so that a repeated page is neither read from Redis nor rendered again.
 *
 * A page is made from many reads (the index, then each entity's fields and roles: about 85
 * keys for a wallet's page of 20), more than a read-cache entry may name. So the page is kept
 * with a mark of every key it read (readcache_mark, taken as each read went out, in the read
 * cache's own invalidation counters), and given again only while the read cache is on, in the
 * same generation, and every mark stands: no key it read has changed since, by a write of any
 * instance or straight to Redis, as the read cache learns it. The reader decides what may be
 * kept at all (never a page whose making depended on the time) and what the key names (every
 * input of the page: route, query, the caller's view).
 *
 * Two-way set-associative by the key's hash, bounded in bytes. Loop thread only. */
#ifndef ENTITYD_FINDCACHE_H
#define ENTITYD_FINDCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/readcache.h"
#include "core/buf.h"

/* Marks one kept page may hold (more: not kept), and its largest body. */
#define FINDCACHE_MAX_MARKS 1024
#define FINDCACHE_MAX_BODY  (64 * 1024)

typedef struct findcache findcache;

typedef struct findcache_stats {
    uint64_t hits, misses, stale; /* stale: found, but a key it read changed since */
    uint64_t fills, dropped;      /* dropped: changed while it was made, or too large */
    size_t bytes, entries;
} findcache_stats;

/* A cache of at most max_bytes over the read cache rc (whose counters judge it); NULL when
 * max_bytes is 0, rc is NULL (no invalidations: nothing may be kept) or memory is short. Every
 * function accepts NULL. */
findcache *findcache_new(size_t max_bytes, readcache *rc);
void findcache_free(findcache *fc);

/* True when pages may be kept now (the cache exists and the read cache is on): a reader then
 * marks its reads. */
bool findcache_active(const findcache *fc);
/* The read cache's generation, taken before a page's first read. */
uint64_t findcache_generation(const findcache *fc);
/* The mark of a key about to be read (or read from the read cache). */
readcache_mark findcache_mark(const findcache *fc, const char *key, size_t len);

/* The body kept under key while it is current, else NULL (a miss, or stale: then dropped).
 * The pointer stays valid until the next findcache_put or findcache_free. */
const char *findcache_get(findcache *fc, const char *key, size_t klen, size_t *body_len);
/* Keeps a copy of body under key, with the generation and the marks of every key its making
 * read; not when a mark no longer stands (a change came while it was made), or it is too large. */
void findcache_put(findcache *fc, const char *key, size_t klen, uint64_t gen,
                   const readcache_mark *marks, size_t nmarks, const char *body, size_t blen);

const findcache_stats *findcache_get_stats(const findcache *fc);
/* A metrics source (core/metrics.h); ctx is the cache, NULL when there is none. */
void findcache_render_metrics(buf *out, void *ctx);

#endif
