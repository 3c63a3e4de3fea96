/* auth revocation: is a signature revoked (EXISTS on its revocation key, redis/keys.h). A write
 * checks it first, beside the recovery; a read route leaves it to ride just ahead of the
 * handler's own read (req->before_read, run by request_read_flags): one round trip, and the one
 * connection answers the check first, so its veto is in place before the read's callback. */
#include <stdbool.h>
#include <stddef.h>

#include "auth/auth_int.h"
#include "auth/session.h"
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
        store_read(ac->req->app->store, 0, cb, ac, 2, argv, lens);
    else
        store_command(ac->req->app->store, cb, ac, 2, argv, lens);
}

/* The request's own check, sent through the read cache. Returns true when the cache answered. */
static bool send_request_check(request *req, int flags, store_cb cb, void *data)
{
    char key[KEYS_REVOKED_SIZE];
    const char *argv[] = {"EXISTS", key};
    size_t lens[] = {6, keys_revoked(key, req->auth->revocation_id)};
    return store_read(req->app->store, flags, cb, data, 2, argv, lens);
}

/* The check came after the handler started: its outcome overrides the handler's answer. */
static void on_deferred(void *data, int status, redisReply *reply)
{
    request *req = data;
    bool revoked = false;
    int st = auth_revocation_answer(status, reply, &revoked);
    if (st == STORE_TIMEOUT) {
        req->auth_veto = 504;
    } else if (st != STORE_OK) {
        req->auth_veto = 503;
    } else if (revoked) {
        req->auth_veto = 401;
        req->app->auth->stats.revoked++;
        req->app->auth->stats.ok--;
    }
}

/* req->before_read: queues the check ahead of the handler's read. Returns the flags for that
 * read: when the check went to Redis, the read must not be answered from the read cache, which
 * would answer it first. */
static int send_deferred(request *req)
{
    /* Room is kept for the read that follows, which is never shed (store.h). */
    bool answered = send_request_check(req, STORE_READ_RESERVE, on_deferred, req);
    return answered ? 0 : STORE_READ_NO_HIT;
}

void auth_revocation_defer(request *req)
{
    req->before_read = send_deferred;
}

typedef struct revocation_then {
    request *req;
    auth_next next;
} revocation_then;

static void on_revocation_then(void *data, int status, redisReply *reply)
{
    revocation_then *t = data;
    on_deferred(t->req, status, reply);
    t->next(t->req);
}

void auth_check_revocation(request *req, auth_next next)
{
    if (!req->before_read) {
        next(req);
        return;
    }
    if (req->auth && req->auth->by_session) {
        session_check_then(req, next);
        return;
    }
    req->before_read = NULL; /* made here instead, alone */
    revocation_then *t = arena_alloc(&req->pool, sizeof *t);
    if (!t) {
        request_fail_internal(req, "out of memory");
        return;
    }
    *t = (revocation_then){req, next};
    send_request_check(req, 0, on_revocation_then, t);
}
