/* auth revocation: is a signature revoked (EXISTS on its revocation key, redis/keys.h). A write
 * checks it first, beside the recovery; a read route leaves it to ride just ahead of the
 * handler's own read (deferred.c). */
#include <stdbool.h>
#include <stddef.h>

#include "auth/auth_int.h"
#include "redis/keys.h"

int auth_revocation_answer(int status, const redisReply *reply, bool *revoked)
{
    if (status != STORE_OK)
        return status;
    if (reply->type != REDIS_REPLY_INTEGER)
        return STORE_UNAVAILABLE;
    *revoked = reply->integer != 0;
    return STORE_OK;
}

void auth_revocation_send(auth_ctx *ac, store_cb cb)
{
    char key[KEYS_REVOKED_SIZE];
    const char *argv[] = {"EXISTS", key};
    size_t lens[] = {6, keys_revoked(key, ac->revocation_id)};
    if (ac->read)
        store_read(ac->req->app->store, STORE_READ_FRESH, cb, ac, 2, argv, lens);
    else
        store_command(ac->req->app->store, cb, ac, 2, argv, lens);
}

/* The request's own check, sent through the read cache. Returns true when the cache answered. */
static bool revocation_send_request(request *req, int flags, store_cb cb, void *data)
{
    char key[KEYS_REVOKED_SIZE];
    const char *argv[] = {"EXISTS", key};
    size_t lens[] = {6, keys_revoked(key, req->auth->revocation_id)};
    return store_read(req->app->store, flags | STORE_READ_FRESH, cb, data, 2, argv, lens);
}

static int revocation_veto(request *req, int status, redisReply *reply)
{
    bool revoked = false;
    int st = auth_revocation_answer(status, reply, &revoked);
    if (st == STORE_TIMEOUT)
        return 504;
    if (st != STORE_OK)
        return 503;
    if (!revoked)
        return 0;
    req->app->auth->stats.revoked++;
    req->app->auth->stats.ok--;
    return 401;
}

static const auth_deferred revocation_deferred = {revocation_send_request, revocation_veto};

void auth_revocation_defer(request *req)
{
    auth_defer(req, &revocation_deferred);
}
