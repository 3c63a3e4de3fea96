/* auth verify: one signature over one given message hash (a challenge's SIWE message, CONTRACT
 * section 13), by the address's key (recovery on the threadpool) or, failing that, by its
 * contract (EIP-1271). Apart from the epoch sign-in of auth.c: no cache, no revocation (a
 * challenge is single-use), no epochs. */
#include <string.h>

#include "auth/auth_int.h"
#include "core/pool.h"
#include "crypto/hex.h"

typedef struct verify_ctx {
    uv_work_t work;
    eip1271_waiter waiter;
    request *req;
    auth_verified done;
    const secp256k1_context *ctx;
    eth_sig sig;
    bool sig_ok; /* an ECDSA signature: recovery is tried */
    uint8_t addr[20], hash[32];
    bool matched;
    const char *text;
    size_t text_len;
} verify_ctx;

/* The signature's bytes as given, for the contract; false when they are no hex. */
static bool raw_bytes(verify_ctx *v, uint8_t **out, size_t *len)
{
    const char *h = v->text;
    size_t n = v->text_len;
    if (n >= 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X')) {
        h += 2;
        n -= 2;
    }
    if (n == 0 || n % 2 || n / 2 > CONTRACT_SIG_MAX)
        return false;
    uint8_t *bytes = arena_alloc(&v->req->pool, n / 2);
    if (!bytes || hex_decode(h, n, bytes, n / 2) != 0)
        return false;
    *out = bytes;
    *len = n / 2;
    return true;
}

static void on_contract(eip1271_waiter *w, int outcome, int which)
{
    (void)which;
    verify_ctx *v = (verify_ctx *)(void *)((char *)w - offsetof(verify_ctx, waiter));
    if (outcome == EIP1271_VALID)
        v->req->app->auth->stats.contract++;
    v->done(v->req, outcome == EIP1271_VALID     ? AUTH_VERIFY_CONTRACT
                    : outcome == EIP1271_INVALID ? AUTH_VERIFY_BAD
                                                 : AUTH_VERIFY_UNAVAILABLE);
}

/* Not the key's: the contract's, when there is an RPC to ask; else refused. */
static void ask_contract(verify_ctx *v)
{
    auth *au = v->req->app->auth;
    uint8_t *bytes, key[32];
    size_t len;
    if (!au->rpc || !raw_bytes(v, &bytes, &len)) {
        v->done(v->req, AUTH_VERIFY_BAD);
        return;
    }
    /* The hash is the challenge's own: it names the round, so no two challenges share a call. */
    int64_t round;
    memcpy(&round, v->hash, sizeof round);
    eip1271_key(v->addr, bytes, len, round, key);
    v->waiter.cb = on_contract;
    eip1271_check(au->rpc, key, v->addr, bytes, len, (const uint8_t(*)[32])v->hash, 1, &v->waiter);
}

static void work_recover(uv_work_t *w)
{
    verify_ctx *v = w->data;
    uint8_t rec[20];
    pool_lower_priority();
    v->matched = sig_recover(v->ctx, &v->sig, v->hash, rec) == 0 && !memcmp(rec, v->addr, 20);
}

static void after_recover(uv_work_t *w, int status)
{
    verify_ctx *v = w->data;
    v->req->app->auth->stats.queue_depth--;
    if (status == 0 && v->matched) {
        v->done(v->req, AUTH_VERIFY_KEY);
        return;
    }
    ask_contract(v);
}

void auth_verify_hash(request *req, const uint8_t addr[20], const char *signature, size_t slen,
                      const uint8_t hash[32], auth_verified done)
{
    auth *au = req->app->auth;
    verify_ctx *v = arena_alloc(&req->pool, sizeof *v);
    if (!v) {
        request_fail_internal(req, "verify context");
        return;
    }
    memset(v, 0, sizeof *v);
    v->req = req;
    v->done = done;
    v->ctx = au->ctx;
    v->text = signature;
    v->text_len = slen;
    memcpy(v->addr, addr, 20);
    memcpy(v->hash, hash, 32);
    v->work.data = v;
    if (sig_parse(signature, slen, &v->sig) == SIG_OK) {
        au->stats.queued++;
        au->stats.queue_depth++;
        if (uv_queue_work(req->app->loop, &v->work, work_recover, after_recover) == 0)
            return;
        au->stats.queue_depth--;
    }
    /* No ECDSA signature (or no pool): only the contract can accept it, answered on a later
     * turn, as eip1271_check promises; without an RPC, refused on this one. */
    if (au->rpc) {
        ask_contract(v);
        return;
    }
    au->stats.malformed++;
    done(req, AUTH_VERIFY_BAD);
}

size_t auth_challenge_message(const auth *au, const uint8_t addr[20], const char *nonce,
                              int64_t issued_ms, int64_t expires_ms, char *out, size_t cap)
{
    return siwe_message_nonce(&au->siwe, addr, nonce, issued_ms, expires_ms, out, cap);
}
