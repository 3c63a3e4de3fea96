/* session: see session.h. */
#include "auth/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth_int.h"
#include "core/app.h"
#include "core/isotime.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"

#define MINUTE_MS 60000

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

/* A leading decimal number of s (len bytes) up to the first ':' or the end; -1 when none. */
static long long leading_number(const char *s, size_t len, size_t *used)
{
    long long v = 0;
    size_t i = 0;
    for (; i < len && s[i] != ':'; i++) {
        if (s[i] < '0' || s[i] > '9' || i >= 18)
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *used = i;
    return i ? v : -1;
}

static void on_touched(void *data, int status, redisReply *reply)
{
    /* Fire and forget: a touch that failed is tried again on the session's next use. */
    (void)data;
    (void)status;
    (void)reply;
}

static void touch(request *req, const token *t, long long minute_ms)
{
    char key[KEYS_SESSIONS_SIZE], minute[24];
    int mlen = snprintf(minute, sizeof minute, "%lld", minute_ms);
    const char *argv[] = {key, t->id, minute};
    size_t lens[] = {keys_sessions(key, t->address), TOKEN_ID_LEN, (size_t)mlen};
    store_script(req->app->store, LUA_SESSION_TOUCH, on_touched, NULL, 1, 3, argv, lens);
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
    long long expires = leading_number(rec->str, rec->len, &n);
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
    long long minute = now - now % MINUTE_MS, last = -1;
    if (used->type == REDIS_REPLY_STRING)
        last = leading_number(used->str, used->len, &n);
    if (last < minute)
        touch(req, t, minute);
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
