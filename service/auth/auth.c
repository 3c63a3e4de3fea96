/* auth: wallet sign-in.
 *
 * A signed request is checked in two halves that run at once: signature recovery (from the cache,
 * or on the libuv threadpool) and the revocation lookup in Redis (revocation.c). The work
 * callback reads only its own copies (hashes, signature) and the shared secp256k1 context, which
 * recovery only reads. The request waits for both halves; its arena holds the state until then.
 * Beside: the epochs' messages (message.c), contract wallets (contract.c), counters (stats.c); the
 * entry, and the credentials that are no signature, are credential.c's. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth_int.h"
#include "auth/limits.h"
#include "auth/session.h"
#include "core/metrics.h"
#include "core/pool.h"

/* Parses the comma-separated PLATFORM_ADMINS. */
static int parse_platform_admins(auth *au, const char *list, char *err, size_t err_len)
{
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    au->platform = calloc(cap, sizeof *au->platform);
    if (!au->platform)
        return -1;
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len) {
            uint8_t a[ADDRESS_SIZE];
            if (address_parse(p, len, a) != ADDRESS_OK) {
                snprintf(err, err_len, "PLATFORM_ADMINS holds an invalid address: \"%.*s\"",
                         (int)(len > 60 ? 60 : len), p);
                return -1;
            }
            address_format_lower(a, au->platform[au->nplatform++]);
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

bool auth_is_platform_admin(const auth *au, const char *caller)
{
    if (!caller || !*caller)
        return false;
    for (size_t i = 0; i < au->nplatform; i++)
        if (!strcmp(au->platform[i], caller))
            return true;
    return false;
}

int auth_new(auth **out, app *a, char *err, size_t err_len)
{
    auth *au = calloc(1, sizeof *au);
    if (!au) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    au->app = a;
    const char *secret = a->cfg.auth_secret;
    if (!*secret && a->cfg.dev)
        secret = "entityd-development-secret-do-not-use-in-production";
    au->secret_len = strlen(secret);
    au->secret = (uint8_t *)strdup(secret);
    au->ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    au->cache = sigcache_new((size_t)a->cfg.sig_cache_size);
    au->siwe_hints = calloc(SIWE_HINTS, sizeof *au->siwe_hints);
    if (*a->cfg.auth_uri) {
        au->siwe_uri = strdup(a->cfg.auth_uri);
    } else if ((au->siwe_uri = malloc(strlen(a->cfg.auth_domain) + 9)) != NULL) {
        strcpy(au->siwe_uri, "https://");
        strcat(au->siwe_uri, a->cfg.auth_domain);
    }
    au->siwe = (siwe_params){.domain = a->cfg.auth_domain,
                             .uri = au->siwe_uri ? au->siwe_uri : "",
                             .chain_id = a->cfg.auth_chain_id,
                             .secret = au->secret,
                             .secret_len = au->secret_len,
                             .epoch_seconds = a->cfg.auth_epoch_seconds};
    size_t scap = siwe_message_cap(&au->siwe);
    if ((au->siwe_head = malloc(scap)) != NULL)
        au->siwe_head_len = siwe_head(&au->siwe, au->siwe_head, scap);
    eip1271_limits lim = {.timeout_ms = a->cfg.eth_rpc_timeout_ms,
                          .max_inflight = a->cfg.eth_rpc_max_inflight,
                          .code_ttl_seconds = a->cfg.eth_rpc_code_ttl_seconds,
                          .max_per_second = a->cfg.eth_rpc_max_per_second};
    if (*a->cfg.eth_rpc_url &&
        eip1271_new(&au->rpc, a->loop, a->cfg.eth_rpc_url, &lim, err, err_len) != 0) {
        auth_free(au);
        return -1;
    }
    if (parse_platform_admins(au, a->cfg.platform_admins, err, err_len) != 0) {
        auth_free(au);
        return -1;
    }
    if (!au->secret || !au->ctx || !au->cache || !au->siwe_uri || !au->siwe_hints ||
        !au->siwe_head_len || auth_refresh(au) != 0) {
        snprintf(err, err_len, "cannot set up the signature verifier");
        auth_free(au);
        return -1;
    }
    metrics_register(auth_stats_render, au);
    limits_register_metrics();
    *out = au;
    return 0;
}

void auth_free(auth *au)
{
    if (!au)
        return;
    if (au->ctx)
        secp256k1_context_destroy(au->ctx);
    sigcache_free(au->cache);
    eip1271_free(au->rpc);
    free(au->siwe_uri);
    free(au->siwe_head);
    free(au->siwe_hints);
    free(au->platform);
    for (int i = 0; i < EPOCHS; i++) {
        free(au->msgs[i].text);
        free(au->msgs[i].siwe_tail);
    }
    free(au->secret);
    free(au);
}

void auth_close(auth *au)
{
    if (au)
        eip1271_close(au->rpc);
}

int64_t auth_request_epoch(const request *req)
{
    return req->auth ? req->auth->matched_epoch : 0;
}

const char *auth_request_revocation_id(const request *req)
{
    return req->auth ? req->auth->revocation_id : "";
}

/* The metrics source (core/metrics.h) of the sign-in checks. */

bool auth_parse_address(request *req, const char *s, size_t len, uint8_t out[20])
{
    int e = address_parse(s, len, out);
    if (e == ADDRESS_OK)
        return true;
    request_fail_field(req, "address",
                       e == ADDRESS_ECHECKSUM
                           ? "The address fails its EIP-55 checksum."
                           : "The address must be 0x followed by 40 hex digits.");
    return false;
}

void auth_unauthenticated(request *req, const char *message)
{
    request_fail(req, 401, "unauthenticated", message, NULL);
}

/* A unit charged before the request was refused goes back: a revoked signature, or one
 * that fails otherwise, never spends its address's budget. */
void auth_give_back(auth_ctx *ac)
{
    if (ac->budget_sent && ac->budget_status == STORE_OK && ac->budget_wait_ms == 0)
        limits_give(ac->req, LIMITS_WRITES, ac->budget_caller);
    ac->budget_sent = false;
}

/* The budget's answer is in and the caller is signed in: on to the handler, or refused. */
void auth_after_budget(auth_ctx *ac)
{
    request *req = ac->req;
    if (ac->budget_sent && (ac->budget_status != STORE_OK || ac->budget_wait_ms > 0)) {
        limits_refuse(req, LIMITS_WRITES, ac->budget_status, ac->budget_wait_ms);
        return;
    }
    ac->next(req);
}

static void contract_done(auth_ctx *ac);

/* Both halves are in: decide. */
static void finish(auth_ctx *ac)
{
    request *req = ac->req;
    auth *au = ac->au;
    if (ac->decide) { /* a credential of credential.c's: its own decision */
        ac->decide(ac);
        return;
    }
    int store_status = ac->store_status != STORE_OK ? ac->store_status : ac->contract_store_status;
    if (store_status == STORE_TIMEOUT) {
        auth_give_back(ac);
        request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        return;
    }
    if (store_status != STORE_OK) {
        auth_give_back(ac);
        request_fail(req, 503, "unavailable", "The data store is unreachable.", NULL);
        return;
    }
    int matched = -1;
    if (ac->have_addr) {
        for (int i = 0; i < 2 && matched < 0; i++)
            if (ac->rec_ok[i] && !memcmp(ac->rec[i], ac->addr, 20))
                matched = i;
        bool expired = matched < 0 && ac->rec_ok[2] && !memcmp(ac->rec[2], ac->addr, 20);
        if (matched < 0 && !expired && ac->contract == CONTRACT_NONE && au->rpc) {
            /* Signed by no key of that address: perhaps by its contract (EIP-1271). */
            if (auth_contract_check(ac, contract_done) == 0)
                return;
        }
        if (matched < 0 && ac->contract == CONTRACT_VALID) {
            matched = ac->contract_epoch;
            memcpy(ac->rec[matched], ac->addr, 20);
            au->stats.contract++;
        }
        if (matched < 0 && ac->contract == CONTRACT_CAPPED) {
            auth_give_back(ac);
            au->stats.unavailable++;
            request_fail_retry(req, 503, "unavailable",
                               "Too many sign-ins of wallets not seen lately; retry shortly.",
                               ac->retry_after);
            return;
        }
        if (matched < 0 && ac->contract == CONTRACT_UNAVAILABLE) {
            auth_give_back(ac);
            au->stats.unavailable++;
            request_fail(req, 503, "unavailable",
                         "The Ethereum RPC endpoint that checks contract-wallet signatures did "
                         "not answer in time; retry shortly.",
                         NULL);
            return;
        }
        if (matched < 0) {
            auth_give_back(ac);
            if (expired) {
                au->stats.expired++;
                auth_unauthenticated(req, "The signature is over an expired sign-in message; sign "
                                          "the current one from GET /api/auth/message.");
            } else {
                au->stats.mismatch++;
                auth_unauthenticated(req,
                                     "The signature does not match the address for the current "
                                     "sign-in message.");
            }
            return;
        }
    } else if (ac->rec_ok[0]) {
        /* Without an address the message cannot be told apart: the current epoch's speaks. */
        matched = 0;
    } else {
        auth_give_back(ac);
        au->stats.mismatch++;
        auth_unauthenticated(req, "The signature does not recover to an address.");
        return;
    }
    if (!ac->cached) {
        sigcache_put(au->cache, ac->by_contract ? ac->contract_key : ac->sig65, ac->epochs[matched],
                     ac->rec[matched]);
        if (ac->siwe_ok[matched])
            au->stats.siwe++;
        if (ac->siwe) {
            int v = au->siwe_vote + (ac->siwe_ok[matched] ? 1 : -1);
            au->siwe_vote = v > SIWE_VOTE_MAX    ? SIWE_VOTE_MAX
                            : v < -SIWE_VOTE_MAX ? -SIWE_VOTE_MAX
                                                 : v;
        }
    }
    if (ac->revoked) {
        auth_give_back(ac);
        au->stats.revoked++;
        auth_unauthenticated(req, "The signature has been revoked.");
        return;
    }
    if (ac->deferred)
        auth_revocation_defer(req); /* a read: the check rides with the handler's own read */
    au->stats.ok++;
    ac->matched_epoch = ac->epochs[matched];
    address_format_lower(ac->rec[matched], req->caller);
    req->signed_in = true;
    if (ac->budget_sent && strcmp(ac->budget_caller, req->caller) != 0) {
        /* Charged for the address the cache named, but another was matched: not this caller's. */
        auth_give_back(ac);
    }
    if (ac->budget && !ac->budget_sent &&
        limits_apply(req, LIMITS_WRITES, auth_is_platform_admin(au, req->caller))) {
        /* The caller became known only now (a recovery): one more round trip for the budget. */
        ac->budget_sent = true;
        memcpy(ac->budget_caller, req->caller, sizeof ac->budget_caller);
        limits_take(req, LIMITS_WRITES, req->caller, auth_on_budget, ac);
        return;
    }
    auth_after_budget(ac);
}

/* One half is in; the last one decides. */
void auth_half_done(auth_ctx *ac)
{
    if (--ac->pending == 0)
        finish(ac);
}

/* The contract's answer: one of the halves finish waits for when the check was started by
 * auth_authenticate, otherwise (started by finish) the request goes on from here. */
static void contract_done(auth_ctx *ac)
{
    if (ac->pending > 0)
        auth_half_done(ac);
    else
        finish(ac);
}

/* The budget's answer: sent early, it is one of the halves finish waits for; sent late
 * (by finish, once nothing else was pending), the request goes on from here. */
void auth_on_budget(request *req, void *data, int status, long long wait_ms)
{
    (void)req;
    auth_ctx *ac = data;
    ac->budget_status = status;
    ac->budget_wait_ms = wait_ms;
    if (ac->pending > 0)
        auth_half_done(ac);
    else
        auth_after_budget(ac);
}

static void on_revocation(void *data, int status, redisReply *reply)
{
    auth_ctx *ac = data;
    ac->store_status = auth_revocation_answer(status, reply, &ac->revoked);
    auth_half_done(ac);
}

static void work_recover(uv_work_t *w)
{
    auth_ctx *ac = w->data;
    pool_lower_priority();
    /* Per epoch, section 2's message and (with an address) its SIWE message, the likelier
     * first; with an address, stop at the first that recovers to it. */
    for (int i = 0; i < ac->tries; i++) {
        bool matched = false;
        for (int k = 0; k < 2 && !matched; k++) {
            if ((k == 0) != ac->siwe_first) {
                ac->rec_ok[i] = sig_recover(ac->ctx, &ac->sig, ac->hashes[i], ac->rec[i]) == 0;
                matched = ac->have_addr && ac->rec_ok[i] && !memcmp(ac->rec[i], ac->addr, 20);
                continue;
            }
            /* Hashed here, off the loop, from the request's own copies. */
            uint8_t hash[32], rec[20];
            if (!ac->siwe)
                continue;
            siwe_hash_parts(ac->siwe_head, ac->siwe_head_len, ac->addr, ac->siwe_tails[i],
                            ac->siwe_tail_lens[i], hash);
            if (sig_recover(ac->ctx, &ac->sig, hash, rec) == 0 && !memcmp(rec, ac->addr, 20)) {
                memcpy(ac->rec[i], rec, 20);
                ac->rec_ok[i] = true;
                ac->siwe_ok[i] = true;
                matched = true;
            }
        }
        if (matched)
            break;
    }
}

static void after_recover(uv_work_t *w, int status)
{
    auth_ctx *ac = w->data;
    ac->au->stats.queue_depth--;
    if (status != 0) /* cancelled: cannot happen as nothing cancels, but never hang */
        memset(ac->rec_ok, 0, sizeof ac->rec_ok);
    auth_half_done(ac);
}

bool auth_request_by_contract(const request *req)
{
    return req->auth && req->auth->by_contract;
}

/* A request's sign-in state, zeroed, in its arena; NULL (and the request answered) when out of
 * memory. */
auth_ctx *auth_ctx_new(request *req, int mode, int flags, auth_next next)
{
    auth_ctx *ac = arena_alloc(&req->pool, sizeof *ac);
    if (!ac) {
        request_fail_internal(req, "auth context");
        return NULL;
    }
    memset(ac, 0, sizeof *ac);
    ac->req = req;
    ac->au = req->app->auth;
    ac->next = next;
    ac->mode = mode;
    ac->flags = flags;
    return ac;
}

/* Sign-in by the query's address and signature (the seed's way). */
void auth_by_signature(request *req, int mode, int flags, auth_next next)
{
    size_t alen = 0, slen = 0;
    const char *address = request_param(req, "address", &alen);
    const char *signature = request_param(req, "signature", &slen);
    auth_authenticate_with(req, mode, flags, address, alen, signature, slen, next);
}

void auth_authenticate_with(request *req, int mode, int flags, const char *address, size_t alen,
                            const char *signature, size_t slen, auth_next next)
{
    auth *au = req->app->auth;
    if (address && alen == 0)
        address = NULL;
    if (signature && slen == 0)
        signature = NULL;
    if (signature)
        req->credential = REQ_CREDENTIAL_QUERY;

    uint8_t addr[20];
    if (address) {
        if (!auth_parse_address(req, address, alen, addr))
            return;
    } else if (mode == AUTH_REQUIRED || mode == AUTH_OPTIONAL) {
        request_fail_field(req, "address", "The address query parameter is required.");
        return;
    }
    if (!signature) {
        if (mode == AUTH_OPTIONAL) {
            next(req);
            return;
        }
        au->stats.missing++;
        auth_unauthenticated(req, "A signature is required: sign the message from GET "
                                  "/api/auth/message and pass address and signature.");
        return;
    }

    auth_ctx *ac = auth_ctx_new(req, mode, flags, next);
    if (!ac)
        return;
    if (auth_refresh(au) != 0) {
        request_fail_internal(req, "auth context");
        return;
    }
    int perr = sig_parse(signature, slen, &ac->sig);
    if (perr != SIG_OK && au->rpc && address && auth_contract_parse(ac, signature, slen)) {
        ac->contract_only = true;
        perr = SIG_OK;
    }
    if (perr != SIG_OK) {
        au->stats.malformed++;
        char msg[160];
        snprintf(msg, sizeof msg, "The signature is malformed: %s", sig_strerror(perr));
        auth_unauthenticated(req, msg);
        return;
    }
    req->auth = ac;
    ac->ctx = au->ctx;
    ac->have_addr = address != NULL;
    if (address)
        memcpy(ac->addr, addr, 20);
    ac->siwe = address ? &au->siwe : NULL;
    ac->sig_text = signature;
    ac->sig_text_len = slen;
    if (ac->contract_only) {
        /* Cached under its contract key; revoked by (address, epoch) once the epoch is known. */
        auth_contract_cache_key(ac->contract_sig, ac->contract_sig_len, ac->contract_key);
        memcpy(ac->sig65, ac->contract_key, 65);
    } else {
        memcpy(ac->sig65, ac->sig.r, 32);
        memcpy(ac->sig65 + 32, ac->sig.s, 32);
        ac->sig65[64] = (uint8_t)ac->sig.recid;
        sig_revocation_id(&ac->sig, ac->revocation_id);
    }
    for (int i = 0; i < EPOCHS; i++) {
        memcpy(ac->hashes[i], au->msgs[i].hash, 32);
        ac->epochs[i] = au->msgs[i].epoch;
    }

    /* The cache answers for the epochs still accepted (current and previous). */
    int cached_at = -1;
    for (int i = 0; i < 2; i++) {
        uint8_t cached[20];
        if (sigcache_get(au->cache, ac->sig65, ac->epochs[i], cached) &&
            (!ac->have_addr || !memcmp(cached, ac->addr, 20))) {
            memcpy(ac->rec[i], cached, 20);
            ac->rec_ok[i] = true;
            ac->cached = true;
            cached_at = i;
            break;
        }
    }
    /* A key's signature its address's contract accepted (a Safe's one owner) is cached under
     * its contract key: asked only when no key's signature is cached, as a recovery follows. */
    for (int i = 0; i < 2 && cached_at < 0 && au->rpc && ac->have_addr && !ac->contract_only; i++) {
        uint8_t cached[20];
        if (auth_contract_raw_signature(ac) == 0 &&
            sigcache_get(au->cache, ac->contract_key, ac->epochs[i], cached) &&
            !memcmp(cached, ac->addr, 20)) {
            memcpy(ac->rec[i], cached, 20);
            ac->rec_ok[i] = true;
            ac->cached = true;
            cached_at = i;
            auth_contract_revocation_id(ac, ac->epochs[i]);
        }
    }
    if (ac->cached && ac->contract_only)
        auth_contract_revocation_id(ac, ac->epochs[cached_at]);

    /* Reads have nothing to undo: their revocation check rides with the data read, one round
     * trip. Writes check it first, in parallel with the recovery. */
    /* The deferred check relies on one connection answering in order; in cluster mode the
     * revocation key lives on its own slot's node, so it is checked up front instead, and for
     * a read through the read cache (as the deferred check is): a repeated read then costs
     * Redis nothing in cluster mode too. */
    ac->read = (flags & AUTH_DEFERRED_REVOCATION) != 0;
    ac->deferred = ac->read && !store_cluster_mode(req->app->store);
    /* A new contract-only signature has no revocation id before its contract has named the
     * epoch it signed: its check follows the contract's answer (on_contract), and a refused
     * one costs Redis nothing. */
    bool after_contract = ac->contract_only && !ac->cached;
    ac->budget = (flags & AUTH_WRITE_BUDGET) != 0;
    ac->pending = (ac->cached ? 0 : 1) + (ac->deferred || after_contract ? 0 : 1);
    /* A cached signature with its address names the caller already: its write budget is
     * charged now, pipelined with the revocation check (one round trip for both). Without an
     * address the epoch that speaks is decided later, so the charge waits for finish. */
    bool early_budget = false;
    if (ac->budget && ac->cached && ac->have_addr) {
        address_format_lower(ac->rec[cached_at], ac->budget_caller);
        early_budget =
            limits_apply(req, LIMITS_WRITES, auth_is_platform_admin(au, ac->budget_caller));
        if (!early_budget)
            ac->budget = false; /* exempt, or no budget configured */
    }
    if (early_budget)
        ac->pending++;
    if (!ac->cached && ac->contract_only) {
        /* No key to recover: the contract's answer is this half. */
        if (auth_contract_check(ac, contract_done) != 0)
            ac->pending--;
    } else if (!ac->cached) {
        /* Without an address only the current epoch is tried; with one, up to the expired
         * epoch so that the answer can say "expired". */
        ac->tries = ac->have_addr ? EPOCHS : 1;
        if (ac->siwe) {
            ac->siwe_head = au->siwe_head;
            ac->siwe_head_len = au->siwe_head_len;
            for (int i = 0; i < EPOCHS; i++) {
                size_t n = au->msgs[i].siwe_tail_len;
                if (!(ac->siwe_tails[i] = arena_alloc(&req->pool, n))) {
                    request_fail_internal(req, "auth context");
                    return;
                }
                memcpy(ac->siwe_tails[i], au->msgs[i].siwe_tail, n);
                ac->siwe_tail_lens[i] = n;
            }
        }
        ac->siwe_first =
            ac->siwe && (!memcmp(auth_siwe_hint(au, ac->addr), ac->addr, 20) || au->siwe_vote > 0);
        ac->work.data = ac;
        au->stats.queued++;
        au->stats.queue_depth++;
        if (uv_queue_work(req->app->loop, &ac->work, work_recover, after_recover) != 0) {
            au->stats.queue_depth--;
            ac->pending--;
        }
    } else {
        au->stats.cache_hits++;
    }
    if (early_budget) {
        ac->budget_sent = true;
        limits_take(req, LIMITS_WRITES, ac->budget_caller, auth_on_budget, ac);
    }
    if (ac->deferred || after_contract) {
        if (ac->pending == 0)
            finish(ac);
        return;
    }
    auth_revocation_send(ac, on_revocation);
}
