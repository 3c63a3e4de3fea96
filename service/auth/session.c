/* session: see session.h. */
#include "auth/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth_int.h"
#include "core/app.h"
#include "core/isotime.h"
#include "redis/keys.h"

bool session_send(request *req, const token *t, int flags, store_cb cb, void *data)
{
    char key[KEYS_SESSIONS_SIZE], used[2 + TOKEN_ID_LEN + 1];
    snprintf(used, sizeof used, "u:%s", t->id);
    const char *argv[] = {"HMGET", key, t->id, used};
    size_t lens[] = {5, keys_sessions(key, t->address), TOKEN_ID_LEN, 2 + TOKEN_ID_LEN};
    /* Through the read cache, as a signature's revocation check: the hash is tracked, so a
     * session ended or touched anywhere leaves every instance's cache when Redis says so, and
     * a repeated request costs Redis nothing, as a repeated signed one does. Its expiry is
     * judged here against the clock, so a kept answer never outlives the session. */
    return store_read(req->app->store, flags | STORE_READ_FRESH, cb, data, 4, argv, lens);
}

int session_answer(request *req, const token *t, int status, const redisReply *reply)
{
    if (status == STORE_TIMEOUT)
        return SESSION_TIMEOUT;
    if (status != STORE_OK || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
        return SESSION_UNAVAILABLE;
    const redisReply *rec = reply->element[0], *used = reply->element[1];
    if (rec->type == REDIS_REPLY_NIL)
        return SESSION_DEAD;
    if (rec->type != REDIS_REPLY_STRING)
        return SESSION_UNAVAILABLE;
    /* "<expiresAtMs>:<createdAtMs>:<kind>:<token hash>:<revocation id or ->" */
    size_t n = 0;
    long long expires = auth_leading_number(rec->str, rec->len, &n);
    const char *p = rec->str + n, *end = rec->str + rec->len;
    for (int colons = 0; p < end && colons < 3; p++)
        colons += *p == ':';
    if (expires < 0 || end - p < TOKEN_HASH_HEX_LEN ||
        (end - p > TOKEN_HASH_HEX_LEN && p[TOKEN_HASH_HEX_LEN] != ':'))
        return SESSION_DEAD; /* a record of no known form proves nothing */
    bool same = token_hash_equal(p, t->hash);
    long long now = isotime_now_ms();
    if (!same || expires <= now)
        return SESSION_DEAD;
    char key[KEYS_SESSIONS_SIZE];
    auth_touch(req, key, keys_sessions(key, t->address), t->id, TOKEN_ID_LEN, used);
    return SESSION_LIVE;
}

/* A verdict as the veto it puts on the request (auth/deferred.c): 0 when live. */
static int session_veto(request *req, int status, redisReply *reply)
{
    int verdict = session_answer(req, &req->auth->session, status, reply);
    if (verdict == SESSION_LIVE)
        return 0;
    if (verdict == SESSION_DEAD)
        return 401;
    return verdict == SESSION_TIMEOUT ? 504 : 503;
}

/* The request's own check, with the store flags the riding asks for. */
static bool session_send_request(request *req, int flags, store_cb cb, void *data)
{
    return session_send(req, &req->auth->session, flags, cb, data);
}

static const auth_deferred session_deferred = {session_send_request, session_veto};

void session_defer(request *req)
{
    auth_defer(req, &session_deferred);
}
