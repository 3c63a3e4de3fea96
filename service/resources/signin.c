/* signin: the sign-in message and signature revocation (POST /api/auth/revoke), which ends the
 * sessions made from that signature too. */
#include <stdio.h>
#include <string.h>

#include "core/app.h"
#include "auth/auth.h"
#include "resources/handlers.h"
#include "core/isotime.h"
#include "crypto/address.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

void auth_message_get(request *req)
{
    auth_message m;
    size_t alen = 0;
    const char *address = request_param(req, "address", &alen);
    if (address) {
        /* CONTRACT section 11: the SIWE message of that address. */
        uint8_t addr[ADDRESS_SIZE];
        if (!auth_parse_address(req, address, alen, addr))
            return;
        size_t cap = auth_siwe_message_cap(req->app->auth);
        char *text = arena_alloc(&req->pool, cap);
        if (!text || auth_siwe_message(req->app->auth, addr, text, cap, &m) != 0) {
            request_fail_internal(req, "siwe message");
            return;
        }
    } else {
        auth_current_message(req->app->auth, &m);
    }
    char issued[ISOTIME_STRING_SIZE], expires[ISOTIME_STRING_SIZE], renew[ISOTIME_STRING_SIZE];
    isotime_format(m.issued_at_ms, issued);
    isotime_format(m.expires_at_ms, expires);
    isotime_format(m.renew_after_ms, renew);
    json_t *data = json_pack("{s:s%, s:I, s:s, s:s, s:s}", "message", m.text, m.len, "epoch",
                             (json_int_t)m.epoch, "issuedAt", issued, "expiresAt", expires,
                             "renewAfter", renew);
    request_reply(req, 200, json_pack("{s:b, s:o}", "success", 1, "data", data));
}

/* The revocation and the end of the signature's sessions, sent together (their keys lie in
 * different slots): the answer waits for both. */
typedef struct revoke_state {
    int pending;
    int status; /* the worst of the two: STORE_OK, or the first failure */
} revoke_state;

static void on_revoked(void *data, int status, redisReply *reply)
{
    request *req = data;
    revoke_state *rs = req->state;
    if (rs->status == STORE_OK && (status != STORE_OK || reply->type == REDIS_REPLY_ERROR))
        rs->status = status != STORE_OK ? status : STORE_UNAVAILABLE;
    if (--rs->pending > 0)
        return;
    if (rs->status == STORE_TIMEOUT) {
        request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        return;
    }
    if (rs->status != STORE_OK) {
        request_fail(req, 503, "unavailable", "The data store is unreachable.", NULL);
        return;
    }
    request_reply(req, 200, json_pack("{s:b}", "success", 1));
}

void auth_revoke_post(request *req)
{
    revoke_state *rs = request_state(req, sizeof *rs);
    if (!rs)
        return;
    rs->pending = 2;
    rs->status = STORE_OK;
    const char *rid = auth_request_revocation_id(req);
    char key[KEYS_REVOKED_SIZE], expiry[32], skey[KEYS_SESSIONS_SIZE];
    size_t klen = keys_revoked(key, rid);
    int elen = snprintf(expiry, sizeof expiry, "%lld",
                        (long long)auth_signature_expiry(req->app->auth, auth_request_epoch(req)));
    const char *argv[2] = {key, expiry};
    size_t lens[2] = {klen, (size_t)elen};
    size_t sklen = keys_sessions(skey, req->caller);
    const char *sargv[2] = {skey, rid};
    size_t slens[2] = {sklen, strlen(rid)};
    store_script(req->app->store, LUA_REVOKE, on_revoked, req, 1, 2, argv, lens);
    store_script(req->app->store, LUA_SESSION_REVOKE, on_revoked, req, 1, 2, sargv, slens);
}
