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

bool session_send(request *req, const token *t, bool ahead, store_cb cb, void *data)
{
    char key[KEYS_SESSIONS_SIZE], used[2 + TOKEN_ID_LEN + 1];
    snprintf(used, sizeof used, "u:%s", t->id);
    const char *argv[] = {"HMGET", key, t->id, used};
    size_t lens[] = {5, keys_sessions(key, t->address), TOKEN_ID_LEN, 2 + TOKEN_ID_LEN};
    /* Through the read cache, as a signature's revocation check: the hash is tracked, so a
     * session ended or touched anywhere leaves every instance's cache when Redis says so, and
     * a repeated request costs Redis nothing, as a repeated signed one does. Its expiry is
     * judged here against the clock, so a kept answer never outlives the session. */
    return store_read(req->app->store, ahead ? STORE_READ_RESERVE : 0, cb, data, 4, argv, lens);
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

/* The verdict of a check that came after the handler started, or alone before next: it
 * overrides the handler's answer. */
static void veto(request *req, int verdict)
{
    if (verdict == SESSION_DEAD)
        req->auth_veto = 401;
    else if (verdict == SESSION_TIMEOUT)
        req->auth_veto = 504;
    else if (verdict != SESSION_LIVE)
        req->auth_veto = 503;
}

static void on_deferred(void *data, int status, redisReply *reply)
{
    request *req = data;
    veto(req, session_answer(req, &req->auth->session, status, reply));
}

/* req->before_read: queues the check ahead of the handler's read. Returns the flags for that
 * read: when the check went to Redis, the read must not be answered from the read cache,
 * which would answer it before the check. */
static int send_deferred(request *req)
{
    bool answered = session_send(req, &req->auth->session, true, on_deferred, req);
    return answered ? 0 : STORE_READ_NO_HIT;
}

void session_defer(request *req)
{
    req->before_read = send_deferred;
}

typedef struct session_then {
    request *req;
    auth_next next;
} session_then;

static void on_checked_then(void *data, int status, redisReply *reply)
{
    session_then *st = data;
    on_deferred(st->req, status, reply);
    st->next(st->req);
}

void session_check_then(request *req, auth_next next)
{
    req->before_read = NULL; /* made here instead, alone */
    session_then *st = arena_alloc(&req->pool, sizeof *st);
    if (!st) {
        request_fail_internal(req, "out of memory");
        return;
    }
    *st = (session_then){req, next};
    session_send(req, &req->auth->session, false, on_checked_then, st);
}
