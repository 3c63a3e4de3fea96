/* invalidation: see invalidation.h. */
#include "redis/invalidation.h"

#include <hiredis/hiredis.h>
#include <string.h>

#include "cache/readcache.h"

bool invalidation_reply_is(const redisReply *r, const char *s)
{
    size_t n = strlen(s);
    return r->type == REDIS_REPLY_STRING && r->len == n && memcmp(r->str, s, n) == 0;
}

void invalidation_apply(readcache *rc, const redisReply *keys)
{
    if (keys->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < keys->elements; i++)
            if (keys->element[i]->type == REDIS_REPLY_STRING)
                readcache_invalidate(rc, keys->element[i]->str, keys->element[i]->len);
    } else {
        readcache_flush(rc);
    }
}
