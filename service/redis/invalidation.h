/* invalidation: what the read cache's two kinds of invalidation connection share, the one for a
 * single Redis (tracking.c) and the one per node of a cluster (cluster_tracking.c): their
 * counters and the handling of one __redis__:invalidate message. */
#ifndef ENTITYD_INVALIDATION_H
#define ENTITYD_INVALIDATION_H

#include <stdbool.h>
#include <stdint.h>

struct redisReply;
struct readcache;

typedef struct tracking_stats {
    uint64_t messages, reconnects, silences;
} tracking_stats;

/* r is the simple string s. */
bool invalidation_reply_is(const struct redisReply *r, const char *s);
/* Applies the key list of one __redis__:invalidate message: those keys' answers go; a nil list
 * (the database was flushed) empties the cache. */
void invalidation_apply(struct readcache *rc, const struct redisReply *keys);

#endif
