/* auth: wallet sign-in.
 *
 * A signed request is checked in two halves that run at once: signature recovery (from the cache,
 * or on the libuv threadpool) and the revocation lookup in Redis. The work callback reads only
 * its own copies (hashes, signature) and the shared secp256k1 context, which recovery only
 * reads. The request waits for both halves; its arena holds the state until then. */
#include "auth/auth.h"

#include <secp256k1.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/app.h"
#include "core/pool.h"
#include "core/metrics.h"
#include "crypto/address.h"
#include "redis/keys.h"
#include "auth/limits.h"
#include "crypto/sig.h"
#include "cache/sigcache.h"
#include "crypto/signin.h"
#include "crypto/siwe.h"
#include "crypto/hex.h"
#include "crypto/keccak.h"
#include "redis/store.h"
#include "rpc/eip1271.h"

/* Messages of the current epoch and the two before it (the oldest only to name "expired"). */
#define EPOCHS 3

/* Longest contract-wallet signature accepted (CONTRACT section 11): 4096 hex digits. */
#define CONTRACT_SIG_MAX 2048

/* Addresses that fetched their SIWE message lately (direct-mapped; a power of two). */
#define SIWE_HINTS 4096
/* Bound of the running vote between the two messages (see siwe_first). */
#define SIWE_VOTE_MAX 64

typedef struct epoch_msg {
    int64_t epoch;
    char *text;
    size_t len;
    uint8_t hash[32];
    char *siwe_tail; /* the SIWE message of the epoch after its address line (crypto/siwe.h) */
    size_t siwe_tail_len;
} epoch_msg;

struct auth {
    app *app;
    secp256k1_context *ctx;
    uint8_t *secret;
    size_t secret_len;
    epoch_msg msgs[EPOCHS]; /* [0] current, [1] previous, [2] the one before */
    sigcache *cache;
    auth_stats stats;
    char (*platform)[ADDRESS_STRING_SIZE]; /* PLATFORM_ADMINS, lowercase */
    size_t nplatform;
    siwe_params siwe; /* borrows the config and the secret */
    char *siwe_uri;   /* AUTH_URI, or https:// + AUTH_DOMAIN */
    char *siwe_head;  /* the SIWE message before its address line, the same every epoch */
    size_t siwe_head_len;
    eip1271 *rpc; /* NULL without ETH_RPC_URL */
    /* Which message a new signature is tried against first: each costs a recovery, so the
     * likelier one goes first. An address that fetched its SIWE message here is likely to
     * have signed it; otherwise the kind most new signatures used lately (a vote, +1 for
     * SIWE, -1 for section 2's, bounded) decides. */
    uint8_t (*siwe_hints)[20];
    int siwe_vote;
};

enum contract_state {
    CONTRACT_NONE = 0, /* not asked */
    CONTRACT_PENDING,
    CONTRACT_VALID,
    CONTRACT_INVALID,
    CONTRACT_UNAVAILABLE, /* the RPC failed, timed out, or too many checks were in flight */
    CONTRACT_CAPPED,      /* the address is not known to hold code and the cap is spent */
};

typedef struct auth_ctx {
    uv_work_t work;
    eip1271_waiter waiter;
    request *req;
    auth *au;
    auth_next next;
    int mode;
    eth_sig sig;
    uint8_t sig65[65];
    bool have_addr;
    uint8_t addr[20];
    int pending; /* halves still running */
    /* threadpool inputs (copies) and outputs */
    const secp256k1_context *ctx;
    uint8_t hashes[EPOCHS][32];
    int64_t epochs[EPOCHS];
    int tries; /* how many hashes the work may try */
    uint8_t rec[EPOCHS][20];
    bool rec_ok[EPOCHS];
    bool siwe_ok[EPOCHS];    /* rec[i] matched through the SIWE message of addr */
    const siwe_params *siwe; /* set when the work may try SIWE messages (an address given) */
    const char *siwe_head;   /* au's, immutable */
    size_t siwe_head_len;
    char *siwe_tails[EPOCHS]; /* copies in the request's memory: refresh() replaces au's */
    size_t siwe_tail_lens[EPOCHS];
    bool siwe_first; /* try the SIWE message of each epoch before section 2's */
    /* Contract wallets (EIP-1271): the signature's text, its bytes when they are no ECDSA
     * signature, and the check's state. */
    const char *sig_text;
    size_t sig_text_len;
    bool contract_only; /* not an ECDSA signature: only the wallet's contract can accept it */
    uint8_t *contract_sig;
    size_t contract_sig_len;
    int contract;        /* enum contract_state */
    int contract_epoch;  /* index into epochs[] that the contract accepted */
    int64_t retry_after; /* with CONTRACT_CAPPED */
    /* The signature cache's key of a signature accepted by a contract (contract_cache_key):
     * apart from the ECDSA key, so that a cached acceptance is known as the contract's. */
    uint8_t contract_key[65];
    bool by_contract;          /* accepted by the contract: revoked by (address, epoch) */
    bool read;                 /* a read route: revocation checks go through store_read */
    int contract_store_status; /* of the revocation check sent after the contract's answer */
    /* results */
    bool cached;
    bool deferred; /* a read: revocation is checked with the handler's read */
    /* The write budget: charged (sent) at once when the cache already names the caller, so it
     * shares the revocation check's round trip; otherwise once the caller is known. */
    bool budget, budget_sent;
    int budget_status;
    long long budget_wait_ms;
    char budget_caller[ADDRESS_STRING_SIZE];
    int store_status;
    bool revoked;
    int64_t matched_epoch;
    char revocation_id[SIG_REVOCATION_ID_SIZE];
} auth_ctx;

static int64_t now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

static int set_message(auth *au, epoch_msg *m, int64_t epoch)
{
    size_t cap = strlen(au->app->cfg.auth_domain) + SIGNIN_MESSAGE_EXTRA;
    char *text = realloc(m->text, cap);
    if (!text)
        return -1;
    m->text = text;
    m->len = signin_message(au->app->cfg.auth_domain, au->secret, au->secret_len,
                            au->app->cfg.auth_epoch_seconds, epoch, text, cap);
    m->epoch = epoch;
    sig_personal_hash(text, m->len, m->hash);
    size_t scap = siwe_message_cap(&au->siwe);
    char *tail = realloc(m->siwe_tail, scap);
    if (!tail)
        return -1;
    m->siwe_tail = tail;
    m->siwe_tail_len = siwe_tail(&au->siwe, epoch, tail, scap);
    return m->len && m->siwe_tail_len ? 0 : -1;
}

/* Keeps msgs[] on the current epoch; cheap when it has not changed. */
static int refresh(auth *au)
{
    int64_t e = signin_epoch(now_seconds(), au->app->cfg.auth_epoch_seconds);
    if (au->msgs[0].text && au->msgs[0].epoch == e)
        return 0;
    for (int i = 0; i < EPOCHS; i++)
        if (set_message(au, &au->msgs[i], e - i) != 0)
            return -1;
    return 0;
}

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

static void auth_render_metrics(buf *out, void *ctx);

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
        !au->siwe_head_len || refresh(au) != 0) {
        snprintf(err, err_len, "cannot set up the signature verifier");
        auth_free(au);
        return -1;
    }
    metrics_register(auth_render_metrics, au);
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

void auth_current_message(auth *au, auth_message *out)
{
    refresh(au);
    int64_t es = au->app->cfg.auth_epoch_seconds;
    out->text = au->msgs[0].text;
    out->len = au->msgs[0].len;
    out->epoch = au->msgs[0].epoch;
    out->issued_at_ms = out->epoch * es * 1000;
    out->renew_after_ms = (out->epoch + 1) * es * 1000;
    out->expires_at_ms = (out->epoch + 2) * es * 1000;
}

void auth_close(auth *au)
{
    if (au)
        eip1271_close(au->rpc);
}

size_t auth_siwe_message_cap(const auth *au)
{
    return siwe_message_cap(&au->siwe);
}

static uint8_t *siwe_hint(auth *au, const uint8_t addr[20])
{
    uint32_t h;
    memcpy(&h, addr, sizeof h);
    return au->siwe_hints[h & (SIWE_HINTS - 1)];
}

int auth_siwe_message(auth *au, const uint8_t addr[20], char *text, size_t cap, auth_message *out)
{
    memcpy(siwe_hint(au, addr), addr, 20);
    auth_current_message(au, out);
    out->len = siwe_message(&au->siwe, addr, out->epoch, text, cap);
    out->text = text;
    return out->len ? 0 : -1;
}

int64_t auth_signature_expiry(const auth *au, int64_t epoch)
{
    return (epoch + 2) * au->app->cfg.auth_epoch_seconds;
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
static void auth_render_metrics(buf *out, void *ctx)
{
    const auth_stats *au = &((const auth *)ctx)->stats;
    metrics_family(out, "entityd_auth_signature_checks_total", "counter",
                   "Sign-in checks by outcome.");
    const struct {
        const char *name;
        uint64_t v;
    } outcomes[] = {{"ok", au->ok},
                    {"missing", au->missing},
                    {"malformed", au->malformed},
                    {"mismatch", au->mismatch},
                    {"expired", au->expired},
                    {"revoked", au->revoked},
                    {"unavailable", au->unavailable}};
    for (size_t i = 0; i < sizeof outcomes / sizeof outcomes[0]; i++)
        buf_printf(out, "entityd_auth_signature_checks_total{outcome=\"%s\"} %llu\n",
                   outcomes[i].name, (unsigned long long)outcomes[i].v);
    metrics_counter(out, "entityd_auth_cache_hits_total", "Signatures answered from the cache.",
                    au->cache_hits);
    metrics_counter(out, "entityd_auth_siwe_signins_total",
                    "Signatures verified over a SIWE (EIP-4361) message.", au->siwe);
    metrics_counter(out, "entityd_auth_contract_signins_total",
                    "Signatures accepted by a contract wallet (EIP-1271).", au->contract);
    metrics_counter(out, "entityd_auth_recoveries_total",
                    "Signature recoveries queued on the threadpool.", au->queued);
    metrics_gauge(out, "entityd_auth_threadpool_queue_depth",
                  "Signature recoveries waiting or running on the threadpool.",
                  (double)au->queue_depth);
}

const auth_stats *auth_get_stats(const auth *au)
{
    return &au->stats;
}

static void on_deferred_revocation(void *data, int status, redisReply *reply)
{
    request *req = data;
    if (status == STORE_TIMEOUT)
        req->auth_veto = 504;
    else if (status != STORE_OK || reply->type != REDIS_REPLY_INTEGER)
        req->auth_veto = 503;
    else if (reply->integer != 0) {
        req->auth_veto = 401;
        req->app->auth->stats.revoked++;
        req->app->auth->stats.ok--;
    }
}

/* req->before_read of a read route's request (request_read_flags runs it): queues the
 * revocation check ahead of the handler's read. Returns the flags for that read: when the check
 * went to Redis, the read must not be answered from the read cache, which would answer it
 * first. */
static int send_deferred_revocation(request *req)
{
    /* Queued first on the one connection, so answered first: the veto is in place before the
     * handler's callback runs (also when both fail at once). */
    char key[KEYS_REVOKED_SIZE];
    const char *argv[] = {"EXISTS", key};
    size_t lens[] = {6, keys_revoked(key, req->auth->revocation_id)};
    /* Room is kept for the read that follows, which is never shed (store.h). */
    bool answered =
        store_read(req->app->store, STORE_READ_RESERVE, on_deferred_revocation, req, 2, argv, lens);
    return answered ? 0 : STORE_READ_NO_HIT;
}

typedef struct revocation_then {
    request *req;
    auth_next next;
} revocation_then;

static void on_revocation_then(void *data, int status, redisReply *reply)
{
    revocation_then *t = data;
    on_deferred_revocation(t->req, status, reply);
    t->next(t->req);
}

void auth_check_revocation(request *req, auth_next next)
{
    if (!req->before_read) {
        next(req);
        return;
    }
    req->before_read = NULL; /* made here instead, alone */
    revocation_then *t = arena_alloc(&req->pool, sizeof *t);
    if (!t) {
        request_fail_internal(req, "out of memory");
        return;
    }
    *t = (revocation_then){req, next};
    char key[KEYS_REVOKED_SIZE];
    const char *argv[] = {"EXISTS", key};
    size_t lens[] = {6, keys_revoked(key, req->auth->revocation_id)};
    store_read(req->app->store, 0, on_revocation_then, t, 2, argv, lens);
}

static void unauthenticated(request *req, const char *message)
{
    request_fail(req, 401, "unauthenticated", message, NULL);
}

/* A unit charged before the request was refused goes back: a revoked signature, or one
 * that fails otherwise, never spends its address's budget. */
static void give_back(auth_ctx *ac)
{
    if (ac->budget_sent && ac->budget_status == STORE_OK && ac->budget_wait_ms == 0)
        limits_give(ac->req, LIMITS_WRITES, ac->budget_caller);
    ac->budget_sent = false;
}

/* The budget's answer is in and the caller is signed in: on to the handler, or refused. */
static void after_budget(auth_ctx *ac)
{
    request *req = ac->req;
    if (ac->budget_sent && (ac->budget_status != STORE_OK || ac->budget_wait_ms > 0)) {
        limits_refuse(req, LIMITS_WRITES, ac->budget_status, ac->budget_wait_ms);
        return;
    }
    ac->next(req);
}

static void on_budget(request *req, void *data, int status, long long wait_ms);
static int contract_check(auth_ctx *ac);

/* Both halves are in: decide. */
static void finish(auth_ctx *ac)
{
    request *req = ac->req;
    auth *au = ac->au;
    int store_status = ac->store_status != STORE_OK ? ac->store_status : ac->contract_store_status;
    if (store_status == STORE_TIMEOUT) {
        give_back(ac);
        request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        return;
    }
    if (store_status != STORE_OK) {
        give_back(ac);
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
            if (contract_check(ac) == 0)
                return;
        }
        if (matched < 0 && ac->contract == CONTRACT_VALID) {
            matched = ac->contract_epoch;
            memcpy(ac->rec[matched], ac->addr, 20);
            au->stats.contract++;
        }
        if (matched < 0 && ac->contract == CONTRACT_CAPPED) {
            give_back(ac);
            au->stats.unavailable++;
            request_fail_retry(req, 503, "unavailable",
                               "Too many sign-ins of wallets not seen lately; retry shortly.",
                               ac->retry_after);
            return;
        }
        if (matched < 0 && ac->contract == CONTRACT_UNAVAILABLE) {
            give_back(ac);
            au->stats.unavailable++;
            request_fail(req, 503, "unavailable",
                         "The Ethereum RPC endpoint that checks contract-wallet signatures did "
                         "not answer in time; retry shortly.",
                         NULL);
            return;
        }
        if (matched < 0) {
            give_back(ac);
            if (expired) {
                au->stats.expired++;
                unauthenticated(req, "The signature is over an expired sign-in message; sign "
                                     "the current one from GET /api/auth/message.");
            } else {
                au->stats.mismatch++;
                unauthenticated(req, "The signature does not match the address for the current "
                                     "sign-in message.");
            }
            return;
        }
    } else if (ac->rec_ok[0]) {
        /* Without an address the message cannot be told apart: the current epoch's speaks. */
        matched = 0;
    } else {
        give_back(ac);
        au->stats.mismatch++;
        unauthenticated(req, "The signature does not recover to an address.");
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
        give_back(ac);
        au->stats.revoked++;
        unauthenticated(req, "The signature has been revoked.");
        return;
    }
    if (ac->deferred) {
        /* A read: the revocation check goes with the handler's own read (request_read_flags). */
        req->before_read = send_deferred_revocation;
    }
    au->stats.ok++;
    ac->matched_epoch = ac->epochs[matched];
    address_format_lower(ac->rec[matched], req->caller);
    req->signed_in = true;
    if (ac->budget_sent && strcmp(ac->budget_caller, req->caller) != 0) {
        /* Charged for the address the cache named, but another was matched: not this caller's. */
        give_back(ac);
    }
    if (ac->budget && !ac->budget_sent &&
        limits_apply(req, LIMITS_WRITES, auth_is_platform_admin(au, req->caller))) {
        /* The caller became known only now (a recovery): one more round trip for the budget. */
        ac->budget_sent = true;
        memcpy(ac->budget_caller, req->caller, sizeof ac->budget_caller);
        limits_take(req, LIMITS_WRITES, req->caller, on_budget, ac);
        return;
    }
    after_budget(ac);
}

/* The cache key of a contract wallet's signature (its exact bytes): keccak256 of them, then
 * 0xff where an ECDSA key has its recovery id (0 or 1), so it never names an ECDSA entry. */
static void contract_cache_key(const uint8_t *sig, size_t len, uint8_t out[65])
{
    keccak256(sig, len, out);
    memset(out + 32, 0xff, 33);
}

/* The revocation id of a sign-in accepted by the contract of ac->addr over the messages of
 * `epoch`: the address and the epoch, not the signature's bytes, which a Safe reads only in
 * part (bytes past its owners' signatures change nothing), so any variant of a revoked
 * signature, and the SIWE sign-in of the same epoch, is revoked with it. */
static void contract_revocation_id(auth_ctx *ac, int64_t epoch)
{
    char a[ADDRESS_STRING_SIZE];
    address_format_lower(ac->addr, a);
    snprintf(ac->revocation_id, sizeof ac->revocation_id, "%s:%lld", a, (long long)epoch);
    ac->by_contract = true;
}

static void half_done(auth_ctx *ac)
{
    if (--ac->pending == 0)
        finish(ac);
}

/* The contract's half is over: one of the halves finish() waits for when started by
 * auth_authenticate, otherwise (started by finish) the request goes on from here. */
static void contract_done(auth_ctx *ac)
{
    if (ac->pending > 0)
        half_done(ac);
    else
        finish(ac);
}

static void on_contract_revocation(void *data, int status, redisReply *reply)
{
    auth_ctx *ac = data;
    if (status != STORE_OK)
        ac->contract_store_status = status;
    else if (reply->type != REDIS_REPLY_INTEGER)
        ac->contract_store_status = STORE_UNAVAILABLE;
    else
        ac->revoked = reply->integer != 0;
    contract_done(ac);
}

static void on_contract(eip1271_waiter *w, int outcome, int which)
{
    auth_ctx *ac = (auth_ctx *)(void *)((char *)w - offsetof(auth_ctx, waiter));
    if (outcome == EIP1271_VALID) {
        ac->contract = CONTRACT_VALID;
        ac->contract_epoch = which / 2;
        /* Known only now: the revocation of (address, epoch), not the one of the signature's
         * r||s (checked up front for a key's signature), decides. A read's check still rides
         * with its data (deferred); otherwise one more round trip, after the RPC's. */
        contract_revocation_id(ac, ac->epochs[ac->contract_epoch]);
        ac->revoked = false;
        if (!ac->deferred) {
            char key[KEYS_REVOKED_SIZE];
            const char *argv[2] = {"EXISTS", key};
            size_t lens[2] = {6, keys_revoked(key, ac->revocation_id)};
            if (ac->read)
                store_read(ac->req->app->store, 0, on_contract_revocation, ac, 2, argv, lens);
            else
                store_command(ac->req->app->store, on_contract_revocation, ac, 2, argv, lens);
            return;
        }
    } else if (outcome == EIP1271_CAPPED) {
        ac->contract = CONTRACT_CAPPED;
        ac->retry_after = w->retry_after;
    } else {
        ac->contract = outcome == EIP1271_INVALID ? CONTRACT_INVALID : CONTRACT_UNAVAILABLE;
    }
    contract_done(ac);
}

/* An ECDSA signature, for its address's contract: its bytes as given (a Safe reads v, which
 * the parsed form normalizes), decoded once into the request's memory, with their cache key.
 * Returns 0, or -1 when they cannot be decoded. */
static int raw_signature(auth_ctx *ac)
{
    if (ac->contract_sig)
        return 0;
    const char *h = ac->sig_text;
    size_t n = ac->sig_text_len;
    if (n >= 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X')) {
        h += 2;
        n -= 2;
    }
    uint8_t *bytes = arena_alloc(&ac->req->pool, n / 2 + 1);
    if (!bytes || n % 2 || hex_decode(h, n, bytes, n / 2) != 0)
        return -1;
    ac->contract_sig = bytes;
    ac->contract_sig_len = n / 2;
    contract_cache_key(bytes, n / 2, ac->contract_key);
    return 0;
}

/* Asks the address's contract about the signature, for the messages of the two accepted
 * epochs (section 2's and the SIWE one of the address): one batched call. Returns 0 when the
 * check is under way (it counts as a half when started by auth_authenticate, otherwise
 * finish() runs again once it is answered), -1 when it cannot be asked (the signature is
 * then refused as not matching). */
static int contract_check(auth_ctx *ac)
{
    auth *au = ac->au;
    if (raw_signature(ac) != 0)
        return -1;
    uint8_t hashes[4][32], key[32];
    for (int i = 0; i < 2; i++) {
        memcpy(hashes[2 * i], ac->hashes[i], 32);
        if (siwe_hash(&au->siwe, ac->addr, ac->epochs[i], hashes[2 * i + 1]) != 0)
            return -1;
    }
    eip1271_key(ac->addr, ac->contract_sig, ac->contract_sig_len, ac->epochs[0], key);
    ac->contract = CONTRACT_PENDING;
    ac->waiter.cb = on_contract;
    eip1271_check(au->rpc, key, ac->addr, ac->contract_sig, ac->contract_sig_len,
                  (const uint8_t(*)[32])hashes, 4, &ac->waiter);
    return 0;
}

/* With ETH_RPC_URL set, a signature that is no ECDSA signature may still be a contract
 * wallet's: "0x" and an even number of hex digits, up to CONTRACT_SIG_MAX bytes. Decodes it
 * into the request's memory. */
static bool parse_contract_sig(auth_ctx *ac, const char *s, size_t len)
{
    if (len < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return false;
    s += 2;
    len -= 2;
    if (len == 0 || len % 2 || len / 2 > CONTRACT_SIG_MAX)
        return false;
    ac->contract_sig = arena_alloc(&ac->req->pool, len / 2);
    if (!ac->contract_sig || hex_decode(s, len, ac->contract_sig, len / 2) != 0)
        return false;
    ac->contract_sig_len = len / 2;
    return true;
}

/* The budget's answer: sent early, it is one of the halves finish() waits for; sent late (by
 * finish, once nothing else was pending), the request goes on from here. */
static void on_budget(request *req, void *data, int status, long long wait_ms)
{
    (void)req;
    auth_ctx *ac = data;
    ac->budget_status = status;
    ac->budget_wait_ms = wait_ms;
    if (ac->pending > 0)
        half_done(ac);
    else
        after_budget(ac);
}

static void on_revocation(void *data, int status, redisReply *reply)
{
    auth_ctx *ac = data;
    ac->store_status = status;
    if (status == STORE_OK) {
        if (reply->type == REDIS_REPLY_INTEGER)
            ac->revoked = reply->integer != 0;
        else
            ac->store_status = STORE_UNAVAILABLE;
    }
    half_done(ac);
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
    half_done(ac);
}

void auth_authenticate(request *req, int mode, int flags, auth_next next)
{
    auth *au = req->app->auth;
    size_t alen = 0, slen = 0;
    const char *address = request_param(req, "address", &alen);
    const char *signature = request_param(req, "signature", &slen);
    if (address && alen == 0)
        address = NULL;
    if (signature && slen == 0)
        signature = NULL;

    uint8_t addr[20];
    if (address) {
        int e = address_parse(address, alen, addr);
        if (e != ADDRESS_OK) {
            request_fail_field(req, "address",
                               e == ADDRESS_ECHECKSUM
                                   ? "The address fails its EIP-55 checksum."
                                   : "The address must be 0x followed by 40 hex digits.");
            return;
        }
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
        unauthenticated(req, "A signature is required: sign the message from GET "
                             "/api/auth/message and pass address and signature.");
        return;
    }

    auth_ctx *ac = arena_alloc(&req->pool, sizeof *ac);
    if (!ac || refresh(au) != 0) {
        request_fail_internal(req, "auth context");
        return;
    }
    memset(ac, 0, sizeof *ac);
    ac->req = req;
    int perr = sig_parse(signature, slen, &ac->sig);
    if (perr != SIG_OK && au->rpc && address && parse_contract_sig(ac, signature, slen)) {
        ac->contract_only = true;
        perr = SIG_OK;
    }
    if (perr != SIG_OK) {
        au->stats.malformed++;
        char msg[160];
        snprintf(msg, sizeof msg, "The signature is malformed: %s", sig_strerror(perr));
        unauthenticated(req, msg);
        return;
    }
    req->auth = ac;
    ac->req = req;
    ac->au = au;
    ac->next = next;
    ac->mode = mode;
    ac->ctx = au->ctx;
    ac->have_addr = address != NULL;
    if (address)
        memcpy(ac->addr, addr, 20);
    ac->siwe = address ? &au->siwe : NULL;
    ac->sig_text = signature;
    ac->sig_text_len = slen;
    if (ac->contract_only) {
        /* Cached under its contract key; revoked by (address, epoch) once the epoch is known. */
        contract_cache_key(ac->contract_sig, ac->contract_sig_len, ac->contract_key);
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
        if (raw_signature(ac) == 0 &&
            sigcache_get(au->cache, ac->contract_key, ac->epochs[i], cached) &&
            !memcmp(cached, ac->addr, 20)) {
            memcpy(ac->rec[i], cached, 20);
            ac->rec_ok[i] = true;
            ac->cached = true;
            cached_at = i;
            contract_revocation_id(ac, ac->epochs[i]);
        }
    }
    if (ac->cached && ac->contract_only)
        contract_revocation_id(ac, ac->epochs[cached_at]);

    /* Reads have nothing to undo: their revocation check rides with the data read, one round
     * trip. Writes check it first, in parallel with the recovery. */
    /* The deferred check relies on one connection answering in order; in cluster mode the
     * revocation key lives on its own slot's node, so it is checked up front instead, and for
     * a read through the read cache (as the deferred check is): a repeated read then costs
     * Redis nothing in cluster mode too. */
    bool read = (flags & AUTH_DEFERRED_REVOCATION) != 0;
    ac->read = read;
    ac->deferred = read && !store_cluster_mode(req->app->store);
    /* A new contract-only signature has no revocation id before its contract has named the
     * epoch it signed: its check follows the contract's answer (on_contract), and a refused
     * one costs Redis nothing. */
    bool after_contract = ac->contract_only && !ac->cached;
    ac->budget = (flags & AUTH_WRITE_BUDGET) != 0;
    ac->pending = (ac->cached ? 0 : 1) + (ac->deferred || after_contract ? 0 : 1);
    /* A cached signature with its address names the caller already: its write budget is
     * charged now, pipelined with the revocation check (one round trip for both). Without an
     * address the epoch that speaks is decided later, so the charge waits for finish(). */
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
        if (contract_check(ac) != 0)
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
            ac->siwe && (!memcmp(siwe_hint(au, ac->addr), ac->addr, 20) || au->siwe_vote > 0);
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
        limits_take(req, LIMITS_WRITES, ac->budget_caller, on_budget, ac);
    }
    if (ac->deferred || after_contract) {
        if (ac->pending == 0)
            finish(ac);
        return;
    }
    char key[KEYS_REVOKED_SIZE];
    const char *argv[2] = {"EXISTS", key};
    size_t lens[2] = {6, keys_revoked(key, ac->revocation_id)};
    if (read)
        store_read(req->app->store, 0, on_revocation, ac, 2, argv, lens);
    else
        store_command(req->app->store, on_revocation, ac, 2, argv, lens);
}
