/* invalidation: what the read cache's two kinds of invalidation connection share, the one for a
 * single Redis (tracking.c) and the one per node of a cluster (cluster_tracking.c): their
 * counters and the handling of one __redis__:invalidate message. */
#ifndef ENTITYD_INVALIDATION_H
#define ENTITYD_INVALIDATION_H

#include <stdbool.h>
#include <stdint.h>

struct redisReply;
struct readcache;

/* Where Redis tells a tracking connection (CLIENT TRACKING ... REDIRECT) which keys changed. */
#define INVALIDATE_CHANNEL "__redis__:invalidate"

typedef struct tracking_stats {
    uint64_t messages, reconnects, silences;
} tracking_stats;

/* What one reply on an invalidation connection was. */
typedef enum invalidation_push {
    INVALIDATION_OTHER,      /* nothing to act on */
    INVALIDATION_ERROR,      /* an error reply: reply->str says which */
    INVALIDATION_SUBSCRIBED, /* both channels are confirmed */
    INVALIDATION_HEARTBEAT,  /* the connection's own heartbeat came back */
    INVALIDATION_APPLIED,    /* an __redis__:invalidate message, applied to the cache */
} invalidation_push;

/* Reads one reply of a connection subscribed to __redis__:invalidate and to its own heartbeat
 * channel `heartbeat`: an invalidation drops its keys' answers from rc (a nil key list, the
 * database flushed, empties it); every message is counted in stats. */
invalidation_push invalidation_read(struct readcache *rc, const struct redisReply *reply,
                                    const char *heartbeat, tracking_stats *stats);

#endif
