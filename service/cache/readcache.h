/* readcache: answers to Redis reads kept in the process, dropped when Redis says their keys
 * changed (client-side caching: tracking.h keeps the invalidation channel, store_read() in
 * store.h reads through the cache).
 *
 * An answer is stored under the exact bytes of the read (one command, or a transaction's
 * commands), or under a shorter description of it its reader gives (store_read_exec_as), with
 * the keys it read. Each key hashes to a counter that every invalidation of
 * that key (a message from Redis, or a write of ours) moves on; an answer is good while its
 * keys' counters are where they were when the read was SENT, so an invalidation that arrives
 * while a read is in flight keeps its answer out. Turning the cache off or on empties it and
 * voids every read in flight: it is on only while Redis is known to deliver invalidations.
 *
 * Two-way set-associative by the read's hash, bounded in bytes. Loop thread only. */
#ifndef ENTITYD_READCACHE_H
#define ENTITYD_READCACHE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define READCACHE_MAX_KEYS  12
#define READCACHE_MAX_ENTRY (64 * 1024) /* bytes of one answer, read and reply together */

typedef struct readcache readcache;

/* Taken when a read is sent; says what its answer may be stored under. */
typedef struct readcache_ticket {
    uint64_t gen;
    int nkeys; /* -1: more keys than READCACHE_MAX_KEYS, never stored */
    uint32_t slot[READCACHE_MAX_KEYS], count[READCACHE_MAX_KEYS];
} readcache_ticket;

typedef struct readcache_stats {
    uint64_t hits, misses, stale; /* stale: found, but a key changed since */
    uint64_t fills, dropped;      /* dropped: invalidated in flight, too large or over budget */
    uint64_t invalidations, flushes;
    uint64_t rendered_hits; /* hits whose rendering was kept too (readcache_rendered) */
    size_t bytes, entries;
} readcache_stats;

/* A cache of at most max_bytes (> 0), off until readcache_set_enabled(). NULL when out of
 * memory. */
readcache *readcache_new(size_t max_bytes);
void readcache_free(readcache *rc);

/* On or off; either way the cache is emptied and every ticket taken before is void. */
void readcache_set_enabled(readcache *rc, bool on);
bool readcache_enabled(const readcache *rc);

/* The stored answer to exactly these bytes, or NULL. The reply stays valid until the next call
 * that stores, invalidates, empties or frees (none of which a store callback can cause). */
const redisReply *readcache_get(readcache *rc, const char *read, size_t len);

/* A ticket for a read about to be sent, then each key it reads. */
void readcache_ticket_begin(const readcache *rc, readcache_ticket *t);
void readcache_ticket_key(const readcache *rc, readcache_ticket *t, const char *key, size_t len);

/* One rendering of a kept answer (an HTTP body made from it), kept beside it and dropped with
 * it, so that a repeated read neither asks Redis nor renders again. Both calls take the reply
 * the last readcache_get() handed out, and do nothing for any other (a reply from Redis, say):
 * call them from the callback the hit went to. A rendering that depends on the time is kept
 * until `until_ms`; its bytes count against the cache's budget. */
const char *readcache_rendered(readcache *rc, const redisReply *reply, int64_t now_ms, size_t *len);
void readcache_keep_rendered(readcache *rc, const redisReply *reply, int64_t until_ms,
                             const char *body, size_t len);

/* A key's change count as it stands, for a reader that keeps what it made from more reads
 * than a ticket holds (cache/findcache.h): it marks each key as its read is sent (or answered
 * from the cache), with the generation as its first read went, and trusts what it made only
 * while readcache_marks_current() says every mark still stands. */
typedef struct readcache_mark {
    uint32_t slot, count;
} readcache_mark;
uint64_t readcache_generation(const readcache *rc);
readcache_mark readcache_mark_key(const readcache *rc, const char *key, size_t len);
/* True while the cache is on, no flush or switch came since generation gen, and no key of
 * the n marks changed since it was marked. */
bool readcache_marks_current(const readcache *rc, uint64_t gen, const readcache_mark *m, size_t n);

/* Stores the answer to a read sent with ticket t, unless the ticket is void, one of its keys
 * changed meanwhile, the answer holds an error, or it does not fit. */
void readcache_put(readcache *rc, const readcache_ticket *t, const char *read, size_t len,
                   const redisReply *reply);

/* A key changed: every answer that read it is void, and so is every read of it in flight. */
void readcache_invalidate(readcache *rc, const char *key, size_t len);
/* Everything changed (FLUSHALL, FLUSHDB): empties the cache and voids every ticket. */
void readcache_flush(readcache *rc);

/* Who hears of every change the cache hears of, for a reader that keeps no answer but must
 * learn that a key changed (push/watch.h): each invalidated key, and key NULL when everything
 * changed (a flush, or the cache turned on or off). One listener; fn NULL to stop. It runs
 * inside the call that invalidates, so it must not call the cache or the store: it notes and
 * acts later. */
typedef void (*readcache_listener)(void *ctx, const char *key, size_t len);
void readcache_set_listener(readcache *rc, readcache_listener fn, void *ctx);

const readcache_stats *readcache_get_stats(const readcache *rc);
/* A metrics source (core/metrics.h); ctx is the cache, NULL when there is none. */
void readcache_render_metrics(buf *out, void *ctx);

#endif
