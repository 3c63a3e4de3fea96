/* apikey: an entity API key used as a request's credential (CONTRACT section 13): the check of
 * its record in Redis, the check's answer, and the minute it was last used. The check is read
 * through the read cache with its keys tracked, so a key deleted, or its creator removed from
 * the owners, on one instance is refused by every instance on its next request. */
#ifndef ENTITYD_APIKEY_H
#define ENTITYD_APIKEY_H

#include <stdbool.h>

#include "auth/token.h"
#include "http/request.h"
#include "redis/store.h"

/* What the check of a key found. */
enum apikey_verdict {
    APIKEY_VALID = 0,
    APIKEY_DEAD,        /* no record, another key's record, or its creator is no owner now */
    APIKEY_TIMEOUT,     /* the store did not answer in time */
    APIKEY_UNAVAILABLE, /* the store failed, or answered something else */
};

/* A key's scope: which routes it may call (api/router.h's ROUTE_KEY_*). */
enum apikey_scope {
    APIKEY_SCOPE_AWARD = 1, /* award and revoke contributions, read the entity */
    APIKEY_SCOPE_ADMIN = 2, /* what an admin may do */
};

/* A valid key's record: its scope and its creator (lowercase address). */
typedef struct apikey_record {
    int scope; /* enum apikey_scope */
    char creator[43];
} apikey_record;

/* Sends redis/lua/apikey_check.lua for the key (its record and whether its creator is still an
 * owner, in the entity's slot) through the read cache. Returns true when cb has already run
 * (the cache's answer, the store not ready, or shed). */
bool apikey_send(request *req, const api_key *k, store_cb cb, void *data);

/* The check's answer: an enum apikey_verdict, with *out filled when APIKEY_VALID. A valid key
 * whose lastUsedAt is older than the current minute is touched (redis/lua/apikey_touch.lua,
 * fire and forget): at most one write a minute per key and instance, none for a deleted key. */
int apikey_answer(request *req, const api_key *k, int status, const redisReply *reply,
                  apikey_record *out);

#endif
