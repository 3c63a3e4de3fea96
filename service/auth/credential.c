/* auth credential: which credential signs a request in (CONTRACT section 13), and the two
 * that are not a signature: a session token (Bearer, else the entityd_session cookie) and an
 * entity API key (Bearer ek_). Each is checked in Redis where the signature path goes anyway
 * (session.c, apikey.c) and decides through ac->decide; the signature path is auth.c's. This
 * file is the entry (auth_authenticate); auth.c calls nothing of it. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "auth/apikey.h"
#include "auth/auth_int.h"
#include "auth/limits.h"
#include "auth/session.h"

/* --- sessions (CONTRACT section 13) --- */

/* The session check's verdict is in (and the budget's, when charged with it): decide. */
static void session_finish(auth_ctx *ac)
{
    request *req = ac->req;
    auth *au = ac->au;
    switch (ac->session_verdict) {
    case SESSION_LIVE:
        break;
    case SESSION_TIMEOUT:
        auth_give_back(ac);
        request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        return;
    case SESSION_DEAD:
        auth_give_back(ac);
        if (req->credential == REQ_CREDENTIAL_COOKIE && ac->mode == AUTH_OPTIONAL) {
            /* A stale cookie where signing is optional: as if it were not there. */
            req->credential = REQ_CREDENTIAL_NONE;
            req->clear_session_cookie = true;
            req->auth = NULL;
            auth_by_signature(req, ac->mode, ac->flags, ac->next);
            return;
        }
        au->stats.revoked++;
        auth_unauthenticated(req, REQUEST_SESSION_DEAD);
        return;
    default:
        auth_give_back(ac);
        request_fail(req, 503, "unavailable", "The data store is unreachable.", NULL);
        return;
    }
    au->stats.ok++;
    memcpy(req->caller, ac->session.address, sizeof req->caller);
    req->signed_in = true;
    auth_after_budget(ac);
}

static void on_session(void *data, int status, redisReply *reply)
{
    auth_ctx *ac = data;
    ac->session_verdict = session_answer(ac->req, &ac->session, status, reply);
    auth_half_done(ac);
}

/* The session token the request carries, Bearer first, parsed into t. Returns the
 * REQ_CREDENTIAL_* it came by; REQ_CREDENTIAL_NONE when there is none to use (a bad cookie
 * where signing is optional is dropped here, and cleared by the answer); -1 when the request
 * has been answered (401). The answers never repeat the token. */
static int session_credential(request *req, int mode, token *t)
{
    if (req->bearer_bad) {
        auth_unauthenticated(req, "The Authorization header is no Bearer session token.");
        return -1;
    }
    if (req->bearer[0]) {
        if (!token_parse_session(req->bearer, strlen(req->bearer), t)) {
            req->app->auth->stats.malformed++;
            auth_unauthenticated(req, REQUEST_SESSION_DEAD);
            return -1;
        }
        return REQ_CREDENTIAL_BEARER;
    }
    if (!req->cookie_bad && !req->session_cookie[0])
        return REQ_CREDENTIAL_NONE;
    if (!req->cookie_bad &&
        token_parse_session(req->session_cookie, strlen(req->session_cookie), t))
        return REQ_CREDENTIAL_COOKIE;
    if (mode == AUTH_OPTIONAL) {
        req->clear_session_cookie = true;
        return REQ_CREDENTIAL_NONE;
    }
    req->app->auth->stats.malformed++;
    auth_unauthenticated(req, REQUEST_SESSION_DEAD);
    return -1;
}

/* Sign-in by a session token. Its check rides where the signature path goes to Redis anyway:
 * a read's just ahead of the handler's read (one round trip), a write's with the budget's
 * charge; else, like a signature's revocation check, alone before the handler. */
static void by_session(request *req, int mode, int flags, auth_next next, const token *t)
{
    auth *au = req->app->auth;
    size_t alen = 0;
    const char *address = request_param(req, "address", &alen);
    if (address && alen) {
        uint8_t addr[20];
        if (!auth_parse_address(req, address, alen, addr))
            return;
        if (memcmp(addr, t->addr, 20) != 0) {
            request_fail_field(req, "address",
                               "The address query parameter names another address than the "
                               "session token's.");
            return;
        }
    }
    auth_ctx *ac = auth_ctx_new(req, mode, flags, next);
    if (!ac)
        return;
    ac->by_session = true;
    ac->decide = session_finish;
    ac->session = *t;
    ac->have_addr = true;
    memcpy(ac->addr, t->addr, 20);
    req->auth = ac;
    ac->read = (flags & AUTH_DEFERRED_REVOCATION) != 0;
    /* A cookie where signing is optional is checked first: when it is dead the request goes on
     * unsigned, which cannot be decided once the handler's read has gone out signed in. In
     * cluster mode the session's key lives on its own slot's node: up front, as a signature's
     * revocation check. */
    ac->deferred = ac->read && !store_cluster_mode(req->app->store) &&
                   !(req->credential == REQ_CREDENTIAL_COOKIE && mode == AUTH_OPTIONAL);
    if (ac->deferred) {
        session_defer(req);
        au->stats.ok++;
        memcpy(req->caller, t->address, sizeof req->caller);
        req->signed_in = true;
        next(req);
        return;
    }
    ac->budget = (flags & AUTH_WRITE_BUDGET) != 0 &&
                 limits_apply(req, LIMITS_WRITES, auth_is_platform_admin(au, t->address));
    ac->pending = ac->budget ? 2 : 1;
    if (ac->budget) {
        /* The token names the caller at once: the charge goes out with the check. */
        ac->budget_sent = true;
        memcpy(ac->budget_caller, t->address, sizeof ac->budget_caller);
        limits_take(req, LIMITS_WRITES, ac->budget_caller, auth_on_budget, ac);
    }
    session_send(req, &ac->session, 0, on_session, ac);
}

/* --- entity API keys (CONTRACT section 13) --- */

static void forbidden(request *req, const char *message)
{
    request_fail(req, 403, "forbidden", message, NULL);
}

/* The key's check (and the budget's answer, when charged with it) is in: decide. */
static void key_finish(auth_ctx *ac)
{
    request *req = ac->req;
    auth *au = ac->au;
    switch (ac->key_verdict) {
    case APIKEY_VALID:
        break;
    case APIKEY_TIMEOUT:
        auth_give_back(ac);
        request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        return;
    case APIKEY_DEAD:
        auth_give_back(ac);
        au->stats.revoked++;
        auth_unauthenticated(req, REQUEST_KEY_DEAD);
        return;
    default:
        auth_give_back(ac);
        request_fail(req, 503, "unavailable", "The data store is unreachable.", NULL);
        return;
    }
    if (!(ac->flags & AUTH_KEY_AWARD) && ac->key_rec.scope != APIKEY_SCOPE_ADMIN) {
        /* An admin-only route: known to refuse this key only once its scope is read. */
        auth_give_back(ac);
        forbidden(req, "An API key of scope award may not call this route.");
        return;
    }
    au->stats.ok++;
    memcpy(req->caller, ac->key_rec.creator, sizeof req->caller);
    req->signed_in = true;
    auth_after_budget(ac);
}

static void on_key(void *data, int status, redisReply *reply)
{
    auth_ctx *ac = data;
    ac->key_verdict = apikey_answer(ac->req, &ac->key, status, reply, &ac->key_rec);
    auth_half_done(ac);
}

/* The entity the route acts on as the request names it: the path's {id} on an entity's
 * routes, the entityID query on /api/skills. False when it is elsewhere (a body's entityID:
 * the handler compares it with req->api_key_entity). */
static bool route_entity(const request *req, const char **id, size_t *len)
{
    static const char prefix[] = "/api/entities/{id}";
    const char *name = req->route_name ? req->route_name : "";
    if (!strncmp(name, prefix, sizeof prefix - 1) && req->npath_params > 0) {
        *id = req->path_params[0].s;
        *len = req->path_params[0].len;
        return true;
    }
    *id = request_param(req, "entityID", len);
    return *id != NULL;
}

/* Sign-in by an entity API key. The route and the entity are judged from the key itself,
 * before anything is spent; the key's check (its record, its creator still an owner) reads
 * through the read cache, where a repeated request finds it without a round trip. A write's
 * budget (the key's own, limit:{ek:<id>}) is charged with the check, in one round trip. */
static void by_key(request *req, int mode, int flags, auth_next next, const api_key *k)
{
    req->credential = REQ_CREDENTIAL_KEY;
    memcpy(req->api_key_id, k->id, sizeof req->api_key_id);
    memcpy(req->api_key_entity, k->entity, sizeof k->entity);
    if (!(flags & (AUTH_KEY_AWARD | AUTH_KEY_ADMIN))) {
        forbidden(req, "An API key may not call this route.");
        return;
    }
    const char *eid;
    size_t elen = 0;
    if (route_entity(req, &eid, &elen) &&
        (elen != strlen(k->entity) || memcmp(eid, k->entity, elen) != 0)) {
        forbidden(req, "An API key acts only on its own entity.");
        return;
    }
    auth_ctx *ac = auth_ctx_new(req, mode, flags, next);
    if (!ac)
        return;
    ac->by_key = true;
    ac->decide = key_finish;
    ac->key = *k;
    req->auth = ac;
    ac->budget = (flags & AUTH_WRITE_BUDGET) != 0 && limits_apply(req, LIMITS_WRITES, false);
    ac->pending = ac->budget ? 2 : 1;
    if (ac->budget) {
        ac->budget_sent = true;
        snprintf(ac->budget_caller, sizeof ac->budget_caller, "ek:%s", k->id);
        limits_take(req, LIMITS_WRITES, ac->budget_caller, auth_on_budget, ac);
    }
    apikey_send(req, &ac->key, on_key, ac);
}

void auth_authenticate(request *req, int mode, int flags, auth_next next)
{
    if (!(flags & AUTH_SIGNATURE_ONLY) && req->bearer[0] && !req->bearer_bad) {
        api_key k;
        if (token_parse_key(req->bearer, strlen(req->bearer), &k)) {
            by_key(req, mode, flags, next, &k);
            return;
        }
    }
    if (!(flags & AUTH_SIGNATURE_ONLY)) {
        token t;
        int credential = session_credential(req, mode, &t);
        if (credential < 0)
            return;
        if (credential != REQ_CREDENTIAL_NONE) {
            req->credential = credential;
            by_session(req, mode, flags, next, &t);
            return;
        }
    }
    auth_by_signature(req, mode, flags, next);
}
