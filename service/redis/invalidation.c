/* invalidation: see invalidation.h. */
#include "redis/invalidation.h"

#include <hiredis/hiredis.h>
#include <string.h>

#include "cache/readcache.h"

static bool reply_is(const redisReply *r, const char *s)
{
    size_t n = strlen(s);
    return r->type == REDIS_REPLY_STRING && r->len == n && memcmp(r->str, s, n) == 0;
}

invalidation_push invalidation_read(readcache *rc, const redisReply *reply, const char *heartbeat,
                                    tracking_stats *stats)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3)
        return reply->type == REDIS_REPLY_ERROR ? INVALIDATION_ERROR : INVALIDATION_OTHER;
    const redisReply *kind = reply->element[0], *chan = reply->element[1],
                     *body = reply->element[2];
    if (reply_is(kind, "subscribe"))
        return body->type == REDIS_REPLY_INTEGER && body->integer == 2 ? INVALIDATION_SUBSCRIBED
                                                                       : INVALIDATION_OTHER;
    if (!reply_is(kind, "message"))
        return INVALIDATION_OTHER;
    stats->messages++;
    if (reply_is(chan, heartbeat))
        return INVALIDATION_HEARTBEAT;
    if (!reply_is(chan, INVALIDATE_CHANNEL))
        return INVALIDATION_OTHER;
    if (body->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < body->elements; i++)
            if (body->element[i]->type == REDIS_REPLY_STRING)
                readcache_invalidate(rc, body->element[i]->str, body->element[i]->len);
    } else {
        readcache_flush(rc);
    }
    return INVALIDATION_APPLIED;
}
