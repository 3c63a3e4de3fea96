/* sessions: sign-in challenges and sessions (CONTRACT section 13): a challenge made, a session
 * made from it or from an epoch signature, a session ended (this one, one by id, all), the
 * caller's sessions listed. A token is answered once, at creation, and never logged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <uv.h>

#include "api/respond.h"
#include "api/validate.h"
#include "auth/auth.h"
#include "auth/token.h"
#include "core/app.h"
#include "core/isotime.h"
#include "crypto/address.h"
#include "crypto/sig.h"
#include "crypto/siwe.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "resources/handlers.h"

#define CHALLENGE_TTL_MS 600000
#define NONCE_LEN        32 /* hex digits: 128 bits */
#define NONCE_MIN        8  /* EIP-4361's least */
#define COOKIE_NAME      "entityd_session"

/* Challenges this process may still make: a bucket of CHALLENGES_PER_SECOND tokens refilled
 * each second, so strangers can keep at most that many times 600 challenges alive per
 * instance (docs/DECISIONS.md). No Redis call, no address-based bound to dodge. */
static double challenge_tokens = -1;
static uint64_t challenge_refill_ms;

static bool challenge_allowed(request *req)
{
    double rate = (double)req->app->cfg.challenges_per_second;
    uint64_t now = uv_now(req->app->loop);
    if (challenge_tokens < 0)
        challenge_tokens = rate;
    challenge_tokens += (double)(now - challenge_refill_ms) * rate / 1000.0;
    challenge_refill_ms = now;
    if (challenge_tokens > rate)
        challenge_tokens = rate;
    if (challenge_tokens < 1)
        return false;
    challenge_tokens -= 1;
    return true;
}

/* A store failure as 503 or 504; true when it answered. */
static bool store_failed(request *req, int status, const redisReply *reply)
{
    if (status == STORE_TIMEOUT) {
        request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        return true;
    }
    if (status != STORE_OK || !reply || reply->type == REDIS_REPLY_ERROR) {
        request_fail(req, 503, "unavailable", "The data store is unreachable.", NULL);
        return true;
    }
    return false;
}

/* body[key] as a string in the request's memory: 1 present, 0 absent, -1 answered (400). */
static int body_string(request *req, json_t *body, const char *key, bool required, const char **out,
                       size_t *len)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) {
        if (!required)
            return 0;
        char msg[64];
        snprintf(msg, sizeof msg, "%s is required.", key);
        request_fail_field(req, key, msg);
        return -1;
    }
    if (!json_is_string(v)) {
        char msg[64];
        snprintf(msg, sizeof msg, "%s must be a string.", key);
        request_fail_field(req, key, msg);
        return -1;
    }
    size_t n = json_string_length(v);
    char *s = arena_alloc(&req->pool, n + 1);
    if (!s) {
        request_fail_internal(req, "body copy");
        return -1;
    }
    memcpy(s, json_string_value(v), n);
    s[n] = '\0';
    *out = s;
    *len = n;
    return 1;
}

/* The body's "address", parsed; false when it answered. */
static bool body_address(request *req, json_t *body, uint8_t addr[20], char lower[43])
{
    const char *s;
    size_t n;
    if (body_string(req, body, "address", true, &s, &n) != 1)
        return false;
    if (!auth_parse_address(req, s, n, addr))
        return false;
    address_format_lower(addr, lower);
    return true;
}

/* ---- POST /api/auth/challenge ---- */

typedef struct challenge_state {
    char nonce[NONCE_LEN + 1];
    int64_t issued_ms;
    char *message;
} challenge_state;

static void on_challenge_stored(void *data, int status, redisReply *reply)
{
    request *req = data;
    challenge_state *cs = req->state;
    if (store_failed(req, status, reply))
        return;
    char expires[ISOTIME_STRING_SIZE];
    isotime_format(cs->issued_ms + CHALLENGE_TTL_MS, expires);
    json_t *d = json_pack("{s:s, s:s, s:s}", "message", cs->message, "nonce", cs->nonce,
                          "expiresAt", expires);
    request_reply(req, 200, json_pack("{s:b, s:o}", "success", 1, "data", d));
}

void auth_challenge_post(request *req)
{
    json_t *body = validate_body(req);
    if (!body)
        return;
    uint8_t addr[20];
    char lower[43];
    bool ok = body_address(req, body, addr, lower);
    json_decref(body);
    if (!ok)
        return;
    if (!challenge_allowed(req)) {
        request_fail_retry(req, 429, "rate_limited",
                           "Too many sign-in challenges right now; retry shortly.", 1);
        return;
    }
    challenge_state *cs = request_state(req, sizeof *cs);
    if (!cs)
        return;
    uint8_t rnd[NONCE_LEN / 2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        request_fail_internal(req, "no randomness");
        return;
    }
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof rnd; i++) {
        cs->nonce[2 * i] = digits[rnd[i] >> 4];
        cs->nonce[2 * i + 1] = digits[rnd[i] & 15];
    }
    cs->issued_ms = isotime_now_ms();
    size_t cap = auth_siwe_message_cap(req->app->auth);
    cs->message = arena_alloc(&req->pool, cap);
    if (!cs->message ||
        !auth_challenge_message(req->app->auth, addr, cs->nonce, cs->issued_ms,
                                cs->issued_ms + CHALLENGE_TTL_MS, cs->message, cap)) {
        request_fail_internal(req, "challenge message");
        return;
    }
    char key[KEYS_CHALLENGE_SIZE], issued[24], px[24];
    size_t klen = keys_challenge(key, lower, cs->nonce);
    int ilen = snprintf(issued, sizeof issued, "%lld", (long long)cs->issued_ms);
    int plen = snprintf(px, sizeof px, "%d", CHALLENGE_TTL_MS);
    const char *argv[] = {"SET", key, issued, "PX", px};
    size_t lens[] = {3, klen, (size_t)ilen, 2, (size_t)plen};
    store_command(req->app->store, on_challenge_stored, req, 5, argv, lens);
}

/* ---- POST /api/auth/session ---- */

typedef struct session_state {
    uint8_t addr[20];
    char address[43];
    const char *signature;
    size_t sig_len;
    const char *nonce;
    char token[TOKEN_SESSION_LEN + 1];
    token t;
    int64_t expires_ms;
} session_state;

/* The Set-Cookie line of a token living max_age seconds ("" token, 0: the cookie cleared). */
static void cookie_line(const request *req, const char *tok, long long max_age, char *out,
                        size_t cap)
{
    snprintf(out, cap, "Set-Cookie: " COOKIE_NAME "=%s%s; Max-Age=%lld\r\n", tok,
             request_session_cookie_attributes(req), max_age);
}

static void on_session_created(void *data, int status, redisReply *reply)
{
    request *req = data;
    session_state *ss = req->state;
    if (status == STORE_OK && reply && reply->type == REDIS_REPLY_ERROR &&
        !strncmp(reply->str, "GONE ", 5)) {
        request_fail(req, 401, "unauthenticated", reply->str + 5, NULL);
        return;
    }
    if (store_failed(req, status, reply))
        return;
    char expires[ISOTIME_STRING_SIZE], cookie[256];
    isotime_format(ss->expires_ms, expires);
    long long max_age = (ss->expires_ms - isotime_now_ms()) / 1000;
    cookie_line(req, ss->token, max_age > 0 ? max_age : 0, cookie, sizeof cookie);
    json_t *d = json_pack("{s:s, s:s, s:s}", "token", ss->token, "address", ss->address,
                          "expiresAt", expires);
    request_reply_headers(req, 201, json_pack("{s:b, s:o}", "success", 1, "data", d), cookie);
    explicit_bzero(ss->token, sizeof ss->token);
}

/* The session's record goes in (and, with a nonce, its challenge goes) in one script. */
static void session_store(request *req, char kind, const char *revocation_id)
{
    session_state *ss = req->state;
    const app *a = req->app;
    if (token_new_session(ss->addr, ss->token, &ss->t) != 0) {
        request_fail_internal(req, "no randomness");
        return;
    }
    char skey[KEYS_SESSIONS_SIZE], ckey[KEYS_CHALLENGE_SIZE], exp[24], max[24];
    char kinds[2] = {kind, '\0'};
    size_t sklen = keys_sessions(skey, ss->address);
    size_t cklen = ss->nonce ? keys_challenge(ckey, ss->address, ss->nonce) : 0;
    int elen = snprintf(exp, sizeof exp, "%lld", (long long)ss->expires_ms);
    int mlen = snprintf(max, sizeof max, "%lld", (long long)a->cfg.sessions_per_address);
    const char *rid = revocation_id && *revocation_id ? revocation_id : "-";
    int nkeys = ss->nonce ? 2 : 1;
    const char *argv[9] = {skey, ckey, ss->t.id, exp, kinds, ss->t.hash, rid, max, req->user_agent};
    size_t lens[9] = {
        sklen,       cklen,        TOKEN_ID_LEN,           (size_t)elen, 1, TOKEN_HASH_HEX_LEN,
        strlen(rid), (size_t)mlen, strlen(req->user_agent)};
    /* Without a challenge its key is left out: KEYS[2] absent. */
    const char **args = argv;
    size_t *arglens = lens;
    if (nkeys == 1) {
        argv[1] = skey;
        lens[1] = sklen;
        args = argv + 1;
        arglens = lens + 1;
    }
    store_script(req->app->store, LUA_SESSION_CREATE, on_session_created, req, nkeys, nkeys + 7,
                 args, arglens);
}

static void on_challenge_verified(request *req, int outcome)
{
    session_state *ss = req->state;
    const config *cfg = &req->app->cfg;
    int64_t now = isotime_now_ms();
    if (outcome == AUTH_VERIFY_UNAVAILABLE) {
        request_fail(req, 503, "unavailable",
                     "The Ethereum RPC endpoint that checks contract-wallet signatures did not "
                     "answer in time; retry shortly.",
                     NULL);
        return;
    }
    if (outcome != AUTH_VERIFY_KEY && outcome != AUTH_VERIFY_CONTRACT) {
        request_fail(req, 401, "unauthenticated",
                     "The signature does not match the address for the challenge's message.", NULL);
        return;
    }
    int64_t ttl = cfg->session_ttl_seconds;
    if (outcome == AUTH_VERIFY_CONTRACT && cfg->session_contract_ttl_seconds < ttl)
        ttl = cfg->session_contract_ttl_seconds;
    ss->expires_ms = now + ttl * 1000;
    session_store(req, outcome == AUTH_VERIFY_CONTRACT ? 'w' : 'c', NULL);
}

static void on_challenge_read(void *data, int status, redisReply *reply)
{
    request *req = data;
    session_state *ss = req->state;
    if (store_failed(req, status, reply))
        return;
    char *end = NULL;
    long long issued = reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, &end, 10) : 0;
    if (reply->type != REDIS_REPLY_STRING || end == reply->str) {
        request_fail(req, 401, "unauthenticated",
                     "The challenge is used or expired; ask for a new one.", NULL);
        return;
    }
    /* The message is rebuilt from the record: what the client sends is never parsed. */
    size_t cap = auth_siwe_message_cap(req->app->auth);
    char *msg = arena_alloc(&req->pool, cap);
    size_t len = msg ? auth_challenge_message(req->app->auth, ss->addr, ss->nonce, issued,
                                              issued + CHALLENGE_TTL_MS, msg, cap)
                     : 0;
    if (!len) {
        request_fail_internal(req, "challenge message");
        return;
    }
    uint8_t hash[32];
    sig_personal_hash(msg, len, hash);
    auth_verify_hash(req, ss->addr, ss->signature, ss->sig_len, hash, on_challenge_verified);
}

/* Signed in with the epoch's message (auth_authenticate_with): the session ends with it. */
static void on_epoch_signed_in(request *req)
{
    session_state *ss = req->state;
    const app *a = req->app;
    int64_t expires = auth_signature_expiry(a->auth, auth_request_epoch(req)) * 1000;
    bool contract = auth_request_by_contract(req);
    if (contract) {
        int64_t cap = isotime_now_ms() + a->cfg.session_contract_ttl_seconds * 1000;
        if (cap < expires)
            expires = cap;
    }
    ss->expires_ms = expires;
    session_store(req, contract ? 'w' : 'e', auth_request_revocation_id(req));
}

void auth_session_post(request *req)
{
    json_t *body = validate_body(req);
    if (!body)
        return;
    session_state *ss = request_state(req, sizeof *ss);
    if (!ss) {
        json_decref(body);
        return;
    }
    size_t nlen = 0;
    int has_nonce = 0;
    bool ok = body_address(req, body, ss->addr, ss->address) &&
              body_string(req, body, "signature", true, &ss->signature, &ss->sig_len) == 1 &&
              (has_nonce = body_string(req, body, "nonce", false, &ss->nonce, &nlen)) >= 0;
    json_decref(body);
    if (!ok)
        return;
    if (!has_nonce) {
        ss->nonce = NULL;
        auth_authenticate_with(req, AUTH_REQUIRED, 0, ss->address, strlen(ss->address),
                               ss->signature, ss->sig_len, on_epoch_signed_in);
        return;
    }
    bool alnum = nlen >= NONCE_MIN && nlen <= SIWE_NONCE_MAX;
    for (size_t i = 0; alnum && i < nlen; i++) {
        char c = ss->nonce[i];
        alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }
    if (!alnum) {
        request_fail_field(req, "nonce",
                           "The nonce must be a challenge's (8 to 32 letters "
                           "and digits).");
        return;
    }
    char key[KEYS_CHALLENGE_SIZE];
    size_t klen = keys_challenge(key, ss->address, ss->nonce);
    const char *argv[] = {"GET", key};
    size_t lens[] = {3, klen};
    store_command(req->app->store, on_challenge_read, req, 2, argv, lens);
}

/* ---- DELETE /api/auth/session: this token ---- */

static void on_this_ended(void *data, int status, redisReply *reply)
{
    request *req = data;
    if (store_failed(req, status, reply))
        return;
    char cookie[256];
    cookie_line(req, "", 0, cookie, sizeof cookie);
    const char *clear = req->bearer[0] ? NULL : cookie;
    if (reply->type != REDIS_REPLY_INTEGER || reply->integer != 1) {
        request_fail_headers(req, 401, "unauthenticated",
                             "The session token is unknown, expired or ended.", clear);
        return;
    }
    json_t *out = respond_ok();
    json_object_set_new(out, "deleted", json_true());
    request_reply_headers(req, 200, out, clear);
}

void auth_session_delete(request *req)
{
    /* Bearer wins over the cookie (section 13). */
    const char *tok = req->bearer[0] ? req->bearer : req->session_cookie;
    token t;
    if (req->bearer_bad || !*tok || !token_parse_session(tok, strlen(tok), &t)) {
        char cookie[256];
        cookie_line(req, "", 0, cookie, sizeof cookie);
        request_fail_headers(req, 401, "unauthenticated",
                             "A session token is required (Authorization: Bearer or the "
                             "session cookie).",
                             !req->bearer[0] && req->session_cookie[0] ? cookie : NULL);
        return;
    }
    char key[KEYS_SESSIONS_SIZE];
    size_t klen = keys_sessions(key, t.address);
    const char *argv[] = {key, t.id, t.hash};
    size_t lens[] = {klen, TOKEN_ID_LEN, TOKEN_HASH_HEX_LEN};
    store_script(req->app->store, LUA_SESSION_END, on_this_ended, req, 1, 3, argv, lens);
}

/* ---- DELETE /api/auth/sessions/{id} ---- */

static void on_id_ended(void *data, int status, redisReply *reply)
{
    request *req = data;
    if (store_failed(req, status, reply))
        return;
    if (reply->type != REDIS_REPLY_INTEGER || reply->integer != 1) {
        request_fail(req, 404, "not_found", "No such session of the caller's.", NULL);
        return;
    }
    respond_deleted(req);
}

void auth_sessions_id_delete(request *req)
{
    slice id = request_path_param(req, 0);
    bool ok = id.len == TOKEN_ID_LEN;
    for (size_t i = 0; ok && i < id.len; i++)
        ok = (id.s[i] >= '0' && id.s[i] <= '9') || (id.s[i] >= 'a' && id.s[i] <= 'f');
    if (!ok) {
        request_fail(req, 404, "not_found", "No such session of the caller's.", NULL);
        return;
    }
    char key[KEYS_SESSIONS_SIZE];
    size_t klen = keys_sessions(key, req->caller);
    const char *argv[] = {key, id.s, ""};
    size_t lens[] = {klen, id.len, 0};
    store_script(req->app->store, LUA_SESSION_END, on_id_ended, req, 1, 3, argv, lens);
}

/* ---- POST /api/auth/sessions/revoke-all ---- */

static void on_all_ended(void *data, int status, redisReply *reply)
{
    request *req = data;
    if (store_failed(req, status, reply))
        return;
    request_reply(req, 200, respond_ok());
}

/* One command (DEL, HGETALL) on the caller's sessions hash. */
static void caller_sessions_command(request *req, const char *cmd, store_cb cb)
{
    char key[KEYS_SESSIONS_SIZE];
    size_t klen = keys_sessions(key, req->caller);
    const char *argv[] = {cmd, key};
    size_t lens[] = {strlen(cmd), klen};
    store_command(req->app->store, cb, req, 2, argv, lens);
}

void auth_sessions_revoke_all(request *req)
{
    caller_sessions_command(req, "DEL", on_all_ended);
}

/* ---- GET /api/auth/sessions ---- */

typedef struct listed {
    const char *id;
    int64_t created, expires, used;
    const redisReply *ua;
} listed;

static int by_created(const void *a, const void *b)
{
    const listed *x = a, *y = b;
    return x->created < y->created ? -1 : x->created > y->created;
}

/* The value of field name in an HGETALL answer, or NULL. */
static const redisReply *field_of(const redisReply *r, const char *prefix, const char *id)
{
    size_t pl = strlen(prefix), il = strlen(id);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *f = r->element[i];
        if (f->type == REDIS_REPLY_STRING && f->len == pl + il && !memcmp(f->str, prefix, pl) &&
            !memcmp(f->str + pl, id, il))
            return r->element[i + 1];
    }
    return NULL;
}

static void on_listed(void *data, int status, redisReply *reply)
{
    request *req = data;
    if (store_failed(req, status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY) {
        request_fail_internal(req, "sessions list reply");
        return;
    }
    size_t n = reply->elements / 2, count = 0;
    listed *items = arena_alloc(&req->pool, (n ? n : 1) * sizeof *items);
    if (!items) {
        request_fail_internal(req, "sessions list");
        return;
    }
    int64_t now = isotime_now_ms();
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *f = reply->element[i], *v = reply->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            f->len != TOKEN_ID_LEN)
            continue;
        long long e = 0, c = 0;
        if (sscanf(v->str, "%lld:%lld:", &e, &c) != 2 || e <= now)
            continue;
        char *id = arena_alloc(&req->pool, f->len + 1);
        if (!id) {
            request_fail_internal(req, "sessions list");
            return;
        }
        memcpy(id, f->str, f->len);
        id[f->len] = '\0';
        const redisReply *u = field_of(reply, "u:", id);
        items[count++] =
            (listed){.id = id,
                     .created = c,
                     .expires = e,
                     .used = u && u->type == REDIS_REPLY_STRING ? strtoll(u->str, NULL, 10) : c,
                     .ua = field_of(reply, "a:", id)};
    }
    qsort(items, count, sizeof *items, by_created);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < count; i++) {
        char created[ISOTIME_STRING_SIZE], expires[ISOTIME_STRING_SIZE], used[ISOTIME_STRING_SIZE];
        isotime_format(items[i].created, created);
        isotime_format(items[i].expires, expires);
        isotime_format(items[i].used - items[i].used % 60000, used);
        json_array_append_new(arr,
                              json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", items[i].id, "createdAt",
                                        created, "expiresAt", expires, "lastUsedAt", used,
                                        "userAgent", respond_string(items[i].ua)));
    }
    request_reply(req, 200, json_pack("{s:b, s:o}", "success", 1, "data", arr));
}

void auth_sessions_get(request *req)
{
    caller_sessions_command(req, "HGETALL", on_listed);
}
