/* eip1271: contract-wallet signatures checked by eth_call of isValidSignature(bytes32,bytes).
 *
 * Anyone may name any address with any signature, and every RPC request may be billed, so
 * nothing is called before the address is known to hold code: its eth_getCode is asked once
 * (one lookup in flight per address, shared by every check waiting on it) and the answer, code
 * or none, is remembered for code_ttl. An address without code is refused with no eth_call.
 * Lookups of addresses not known yet take a token of a per-instance bucket (max_per_second):
 * an empty bucket refuses the check at once (EIP1271_CAPPED, 503 upstream), while addresses
 * known to hold code are checked without one.
 *
 * One check of a contract is one HTTP request holding a JSON-RPC batch: one eth_call per
 * candidate hash (the sign-in messages a caller may have signed), so it costs one round trip
 * whatever the message. Checks of the same (address, signature) in flight share that request;
 * a refusal is remembered for REFUSAL_MS so a repeated bad signature costs the RPC nothing; an
 * acceptance is kept by the caller (auth's signature cache) for the signature's life. */
#include "rpc/eip1271.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/log.h"
#include "core/metrics.h"
#include "crypto/abi.h"
#include "crypto/address.h"
#include "crypto/hex.h"
#include "crypto/keccak.h"
#include "rpc/httpc.h"

#define REFUSAL_MS    10000
#define REFUSAL_SLOTS 4096 /* direct-mapped, a power of two */

/* Addresses whose code is remembered: CODE_SETS sets (a power of two) of CODE_WAYS, 32 bytes
 * each, 512 KiB in all. A full set gives up an expired entry first, then one without code:
 * a flood of random addresses (each one token of the cap) cannot push out the contracts in
 * use, which would make them spend the cap again. */
#define CODE_SETS 4096
#define CODE_WAYS 4

enum code_state { CODE_UNKNOWN = 0, CODE_NONE, CODE_SOME };

/* Latency buckets (seconds) of the calls. */
static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NBUCKETS (sizeof buckets / sizeof buckets[0])

typedef struct call {
    eip1271 *e;
    uint8_t key[32];
    eip1271_waiter *waiters;
    int nhashes;
    struct call *next;
    /* While the address's code is being asked: the batch to send, and the next call waiting
     * on the same lookup. */
    char *body;
    size_t body_len;
    struct call *next_waiting;
} call;

/* One eth_getCode in flight, and the calls waiting on its answer. */
typedef struct probe {
    eip1271 *e;
    uint8_t addr[20];
    call *waiting;
    struct probe *next;
    uint64_t started_ms;
} probe;

typedef struct code_entry {
    uint8_t addr[20];
    uint8_t state; /* enum code_state */
    uint64_t until_ms;
} code_entry;

typedef struct refusal {
    uint8_t key[32];
    uint64_t until_ms;
} refusal;

struct eip1271 {
    uv_loop_t *loop;
    httpc *http;
    char *url;
    long timeout_ms;
    int64_t max_inflight, inflight;
    call *calls;
    probe *probes;
    refusal *refusals;
    code_entry *codes;
    uint64_t code_ttl_ms;
    /* The cap on lookups of unknown addresses: a token bucket holding up to one second's. */
    double rate, tokens;
    uint64_t tokens_at_ms;
    uv_timer_t soon; /* delivers the answers known at once, on the next turn */
    eip1271_waiter *ready, **ready_tail;
    bool closed;
    /* metrics */
    uint64_t calls_total, coalesced, refusals_remembered, busy;
    uint64_t valid, invalid, unavailable, timeouts;
    uint64_t code_lookups, no_code, capped;
    uint64_t bucket_counts[NBUCKETS + 1];
    double seconds_sum;
};

void eip1271_key(const uint8_t addr[20], const uint8_t *sig, size_t sig_len, int64_t round,
                 uint8_t out[32])
{
    struct keccak256_ctx k;
    uint8_t r[8];
    for (int i = 0; i < 8; i++)
        r[i] = (uint8_t)((uint64_t)round >> (56 - 8 * i));
    keccak256_init(&k);
    keccak256_update(&k, addr, 20);
    keccak256_update(&k, sig, sig_len);
    keccak256_update(&k, r, sizeof r);
    keccak256_final(&k, out);
}

static refusal *refusal_slot(eip1271 *e, const uint8_t key[32])
{
    uint32_t h;
    memcpy(&h, key, sizeof h);
    return &e->refusals[h & (REFUSAL_SLOTS - 1)];
}

static void deliver_ready(eip1271 *e)
{
    while (e->ready) {
        eip1271_waiter *w = e->ready;
        e->ready = w->next;
        if (!e->ready)
            e->ready_tail = &e->ready;
        w->cb(w, w->outcome, w->which);
    }
}

static void on_soon(uv_timer_t *t)
{
    deliver_ready(t->data);
}

/* Answers w on the next loop turn: the caller is still inside eip1271_check. */
static void answer_soon(eip1271 *e, eip1271_waiter *w, int outcome)
{
    w->outcome = outcome;
    w->which = 0;
    w->next = NULL;
    if (outcome != EIP1271_CAPPED)
        w->retry_after = 0;
    *e->ready_tail = w;
    e->ready_tail = &w->next;
    if (!e->closed)
        uv_timer_start(&e->soon, on_soon, 0, 0);
}

static void render_metrics(buf *out, void *ctx)
{
    const eip1271 *e = ctx;
    metrics_counter(out, "entityd_eth_rpc_calls_total",
                    "EIP-1271 checks sent to the Ethereum RPC (one HTTP request each).",
                    e->calls_total);
    metrics_counter(out, "entityd_eth_rpc_code_lookups_total",
                    "eth_getCode requests sent to the Ethereum RPC (one per address not known "
                    "to hold code, per ETH_RPC_CODE_TTL_SECONDS).",
                    e->code_lookups);
    const metrics_labelled outcomes[] = {{"valid", e->valid},
                                         {"invalid", e->invalid},
                                         {"unavailable", e->unavailable},
                                         {"timeout", e->timeouts},
                                         {"busy", e->busy},
                                         {"coalesced", e->coalesced},
                                         {"refusal_remembered", e->refusals_remembered},
                                         {"no_code", e->no_code},
                                         {"capped", e->capped}};
    metrics_counter_by(out, "entityd_eth_rpc_checks_total",
                       "EIP-1271 checks by outcome (coalesced, remembered, no_code and capped ones "
                       "sent no eth_call).",
                       "outcome", outcomes, sizeof outcomes / sizeof outcomes[0]);
    metrics_gauge(out, "entityd_eth_rpc_inflight", "EIP-1271 calls in flight.",
                  (double)e->inflight);
    metrics_family(out, "entityd_eth_rpc_call_duration_seconds", "histogram",
                   "Time from sending an EIP-1271 call to its answer or failure.");
    uint64_t cum = 0;
    for (size_t i = 0; i < NBUCKETS; i++) {
        cum += e->bucket_counts[i];
        buf_printf(out, "entityd_eth_rpc_call_duration_seconds_bucket{le=\"%g\"} %llu\n",
                   buckets[i], (unsigned long long)cum);
    }
    cum += e->bucket_counts[NBUCKETS];
    buf_printf(out, "entityd_eth_rpc_call_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
               (unsigned long long)cum);
    buf_printf(out, "entityd_eth_rpc_call_duration_seconds_sum %.6f\n", e->seconds_sum);
    buf_printf(out, "entityd_eth_rpc_call_duration_seconds_count %llu\n", (unsigned long long)cum);
}

/* scheme://host[:port] of the URL, what may appear in a log line: providers put keys in the
 * userinfo, the path (…/v3/KEY) or the query. */
static void redacted_url(const char *url, char *out, size_t cap)
{
    const char *scheme_end = strstr(url, "://");
    const char *host = scheme_end ? scheme_end + 3 : url;
    const char *end = host + strcspn(host, "/?#");
    const char *at = NULL;
    for (const char *p = host; p < end; p++)
        if (*p == '@')
            at = p;
    if (at)
        host = at + 1;
    snprintf(out, cap, "%.*s://%.*s", (int)(scheme_end ? scheme_end - url : 4),
             scheme_end ? url : "http", (int)(end - host), host);
}

int eip1271_new(eip1271 **out, uv_loop_t *loop, const char *url, const eip1271_limits *lim,
                char *err, size_t err_len)
{
    eip1271 *e = calloc(1, sizeof *e);
    if (!e || !(e->url = strdup(url)) ||
        !(e->refusals = calloc(REFUSAL_SLOTS, sizeof *e->refusals)) ||
        !(e->codes = calloc((size_t)CODE_SETS * CODE_WAYS, sizeof *e->codes))) {
        if (e) {
            free(e->refusals);
            free(e->url);
        }
        free(e);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    if (httpc_new(&e->http, loop, err, err_len) != 0) {
        free(e->codes);
        free(e->refusals);
        free(e->url);
        free(e);
        return -1;
    }
    e->loop = loop;
    uv_timer_init(loop, &e->soon);
    e->soon.data = e;
    e->ready_tail = &e->ready;
    e->timeout_ms = (long)lim->timeout_ms;
    e->max_inflight = lim->max_inflight;
    e->code_ttl_ms = (uint64_t)lim->code_ttl_seconds * 1000;
    e->rate = (double)lim->max_per_second;
    e->tokens = e->rate;
    e->tokens_at_ms = uv_now(loop);
    metrics_register(render_metrics, e);
    char shown[512];
    redacted_url(url, shown, sizeof shown);
    log_event(LOG_INFO, "contract-wallet signatures (EIP-1271) checked through", shown);
    *out = e;
    return 0;
}

void eip1271_close(eip1271 *e)
{
    if (!e || e->closed)
        return;
    e->closed = true;
    httpc_close(e->http);
    deliver_ready(e);
    uv_timer_stop(&e->soon);
    uv_close((uv_handle_t *)&e->soon, NULL);
}

void eip1271_free(eip1271 *e)
{
    if (!e)
        return;
    httpc_free(e->http);
    free(e->codes);
    free(e->refusals);
    free(e->url);
    free(e);
}

/* Answers every waiter of c and forgets c. */
static void call_end(call *c, int outcome, int which)
{
    eip1271 *e = c->e;
    for (call **p = &e->calls; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    e->inflight--;
    if (outcome == EIP1271_INVALID) {
        refusal *r = refusal_slot(e, c->key);
        memcpy(r->key, c->key, 32);
        r->until_ms = uv_now(e->loop) + REFUSAL_MS;
    }
    eip1271_waiter *w = c->waiters;
    free(c->body);
    free(c);
    while (w) {
        eip1271_waiter *next = w->next;
        w->cb(w, outcome, which);
        w = next;
    }
}

/* An error object of a batch item: a revert refuses; anything else is the RPC's trouble. */
static bool is_revert(json_t *error)
{
    json_int_t code = json_integer_value(json_object_get(error, "code"));
    const char *msg = json_string_value(json_object_get(error, "message"));
    /* Geth and Erigon answer code 3, "execution reverted"; others say it in words. A rate
     * limit or an unsynced node is no refusal: that check answers 503, not 401. */
    return code == 3 || (msg && (strstr(msg, "revert") || strstr(msg, "VM execution error")));
}

/* The batch's answer: the lowest id that answered the magic value, -1 when every item was
 * refused, -2 when the answer is not one this checker understands. */
static int read_batch(const char *body, size_t len, int n)
{
    json_t *root = json_loadb(body, len, 0, NULL);
    int best = -2;
    if (json_is_array(root) && (int)json_array_size(root) == n) {
        best = -1;
        size_t i;
        json_t *item;
        json_array_foreach(root, i, item)
        {
            json_int_t id = json_integer_value(json_object_get(item, "id"));
            json_t *result = json_object_get(item, "result");
            json_t *error = json_object_get(item, "error");
            if (json_is_string(result)) {
                if (abi_is_magic_value(json_string_value(result), json_string_length(result)) &&
                    id >= 0 && id < n && (best < 0 || id < best))
                    best = (int)id;
            } else if (!(error && is_revert(error))) {
                best = -2;
                break;
            }
        }
    }
    json_decref(root);
    return best;
}

static void on_answer(void *data, const httpc_result *r)
{
    call *c = data;
    eip1271 *e = c->e;
    size_t b = 0;
    while (b < NBUCKETS && r->seconds > buckets[b])
        b++;
    e->bucket_counts[b]++;
    e->seconds_sum += r->seconds;
    if (r->status == HTTPC_TIMEOUT) {
        e->timeouts++;
        log_event(LOG_WARN, "eth rpc: EIP-1271 check timed out", r->error);
        call_end(c, EIP1271_UNAVAILABLE, 0);
        return;
    }
    if (r->status != HTTPC_OK || r->http_code != 200) {
        e->unavailable++;
        char why[160];
        if (r->status == HTTPC_OK)
            snprintf(why, sizeof why, "HTTP status %ld", r->http_code);
        log_event(LOG_WARN, "eth rpc: EIP-1271 check failed",
                  r->status == HTTPC_OK ? why : r->error);
        call_end(c, EIP1271_UNAVAILABLE, 0);
        return;
    }
    int which = read_batch(r->body, r->body_len, c->nhashes);
    if (which >= 0) {
        e->valid++;
        call_end(c, EIP1271_VALID, which);
    } else if (which == -1) {
        e->invalid++;
        call_end(c, EIP1271_INVALID, 0);
    } else {
        e->unavailable++;
        log_event(LOG_WARN, "eth rpc: EIP-1271 check got an answer it cannot read", NULL);
        call_end(c, EIP1271_UNAVAILABLE, 0);
    }
}

/* The JSON-RPC batch: one eth_call of isValidSignature(hash, sig) on addr per hash. */
static char *build_batch(const uint8_t addr[20], const uint8_t *sig, size_t sig_len,
                         const uint8_t (*hashes)[32], int n, size_t *len_out)
{
    size_t data_cap = abi_is_valid_signature_size(sig_len);
    size_t cap = (size_t)n * (data_cap + 160) + 4;
    char *body = malloc(cap), *data = malloc(data_cap);
    if (!body || !data) {
        free(body);
        free(data);
        return NULL;
    }
    char to[ADDRESS_STRING_SIZE];
    address_format_lower(addr, to);
    size_t len = 0;
    body[len++] = '[';
    for (int i = 0; i < n; i++) {
        abi_is_valid_signature(hashes[i], sig, sig_len, data, data_cap);
        int k = snprintf(body + len, cap - len,
                         "%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"eth_call\",\"params\":[{"
                         "\"to\":\"%s\",\"data\":\"%s\"},\"latest\"]}",
                         i ? "," : "", i, to, data);
        if (k < 0 || (size_t)k >= cap - len) {
            free(body);
            free(data);
            return NULL;
        }
        len += (size_t)k;
    }
    body[len++] = ']';
    body[len] = '\0';
    free(data);
    *len_out = len;
    return body;
}

/* The set of addr in the code table. */
static code_entry *code_set(eip1271 *e, const uint8_t addr[20])
{
    uint32_t h;
    memcpy(&h, addr + 16, sizeof h); /* addresses are hashes: any four bytes spread well */
    return &e->codes[(size_t)(h & (CODE_SETS - 1)) * CODE_WAYS];
}

/* What is remembered of addr's code: CODE_UNKNOWN when nothing, or no longer. */
static int code_known(eip1271 *e, const uint8_t addr[20])
{
    code_entry *set = code_set(e, addr);
    uint64_t now = uv_now(e->loop);
    for (int i = 0; i < CODE_WAYS; i++)
        if (set[i].state != CODE_UNKNOWN && set[i].until_ms > now && !memcmp(set[i].addr, addr, 20))
            return set[i].state;
    return CODE_UNKNOWN;
}

static void code_remember(eip1271 *e, const uint8_t addr[20], int state)
{
    code_entry *set = code_set(e, addr), *victim = NULL;
    uint64_t now = uv_now(e->loop);
    for (int i = 0; i < CODE_WAYS && !victim; i++)
        if (!memcmp(set[i].addr, addr, 20) || set[i].state == CODE_UNKNOWN ||
            set[i].until_ms <= now)
            victim = &set[i];
    /* Full of live entries: the one without code that expires first, else the oldest. */
    for (int pass = 0; pass < 2 && !victim; pass++)
        for (int i = 0; i < CODE_WAYS; i++)
            if ((pass == 1 || set[i].state == CODE_NONE) &&
                (!victim || set[i].until_ms < victim->until_ms))
                victim = &set[i];
    memcpy(victim->addr, addr, 20);
    victim->state = (uint8_t)state;
    victim->until_ms = now + e->code_ttl_ms;
}

/* Takes one token of the cap on lookups of unknown addresses. Returns 0, or the seconds until
 * a token is there again. */
static int64_t cap_take(eip1271 *e)
{
    uint64_t now = uv_now(e->loop);
    e->tokens += (double)(now - e->tokens_at_ms) * e->rate / 1000.0;
    if (e->tokens > e->rate)
        e->tokens = e->rate;
    e->tokens_at_ms = now;
    if (e->tokens >= 1) {
        e->tokens -= 1;
        return 0;
    }
    int64_t s = (int64_t)((1 - e->tokens) / e->rate + 0.999);
    return s < 1 ? 1 : s;
}

/* Sends c's batch (now that its address is known to hold code) with what is left of the
 * check's deadline; on failure c ends at once. */
static void call_send(call *c, long timeout_ms)
{
    eip1271 *e = c->e;
    int rc = httpc_post_json(e->http, e->url, c->body, c->body_len, timeout_ms, on_answer, c);
    free(c->body);
    c->body = NULL;
    if (rc != 0) {
        e->unavailable++;
        call_end(c, EIP1271_UNAVAILABLE, 0);
        return;
    }
    e->calls_total++;
}

/* eth_getCode's answer: CODE_SOME, CODE_NONE, or -1 when it cannot be read. */
static int read_code(const char *body, size_t len)
{
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *result = json_object_get(root, "result");
    int state = -1;
    if (json_is_string(result)) {
        const char *v = json_string_value(result);
        size_t n = json_string_length(result);
        /* "0x" is no code; some nodes answer "0x0" or "". */
        if (n == 0 || !strcmp(v, "0x") || !strcmp(v, "0x0"))
            state = CODE_NONE;
        else if (n > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X'))
            state = CODE_SOME;
    }
    json_decref(root);
    return state;
}

static void on_code(void *data, const httpc_result *r)
{
    probe *p = data;
    eip1271 *e = p->e;
    for (probe **q = &e->probes; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            break;
        }
    int state = -1;
    if (r->status == HTTPC_TIMEOUT) {
        e->timeouts++;
        log_event(LOG_WARN, "eth rpc: eth_getCode timed out", r->error);
    } else if (r->status != HTTPC_OK || r->http_code != 200) {
        char why[160];
        if (r->status == HTTPC_OK)
            snprintf(why, sizeof why, "HTTP status %ld", r->http_code);
        log_event(LOG_WARN, "eth rpc: eth_getCode failed", r->status == HTTPC_OK ? why : r->error);
    } else if ((state = read_code(r->body, r->body_len)) < 0) {
        log_event(LOG_WARN, "eth rpc: eth_getCode got an answer it cannot read", NULL);
    }
    if (state >= 0)
        code_remember(e, p->addr, state);
    /* The lookup and the call share one deadline (ETH_RPC_TIMEOUT_MS): a sign-in never waits
     * twice as long for a contract seen for the first time. */
    long spent = (long)(uv_now(e->loop) - p->started_ms);
    long left = e->timeout_ms - spent > 1 ? e->timeout_ms - spent : 1;
    call *c = p->waiting;
    free(p);
    while (c) {
        call *next = c->next_waiting;
        c->next_waiting = NULL;
        if (state == CODE_SOME) {
            call_send(c, left);
        } else if (state == CODE_NONE) {
            e->no_code++;
            call_end(c, EIP1271_INVALID, 0);
        } else {
            e->unavailable++;
            call_end(c, EIP1271_UNAVAILABLE, 0);
        }
        c = next;
    }
}

/* Starts the eth_getCode of addr. Returns the probe, or NULL when it could not start. */
static probe *probe_start(eip1271 *e, const uint8_t addr[20])
{
    probe *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    char a[ADDRESS_STRING_SIZE], body[128];
    address_format_lower(addr, a);
    int len = snprintf(body, sizeof body,
                       "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"eth_getCode\",\"params\":["
                       "\"%s\",\"latest\"]}",
                       a);
    p->e = e;
    memcpy(p->addr, addr, 20);
    p->started_ms = uv_now(e->loop);
    if (httpc_post_json(e->http, e->url, body, (size_t)len, e->timeout_ms, on_code, p) != 0) {
        free(p);
        return NULL;
    }
    e->code_lookups++;
    p->next = e->probes;
    e->probes = p;
    return p;
}

void eip1271_check(eip1271 *e, const uint8_t key[32], const uint8_t addr[20], const uint8_t *sig,
                   size_t sig_len, const uint8_t (*hashes)[32], int n, eip1271_waiter *w)
{
    w->next = NULL;
    w->retry_after = 0;
    refusal *r = refusal_slot(e, key);
    if (r->until_ms > uv_now(e->loop) && !memcmp(r->key, key, 32)) {
        e->refusals_remembered++;
        answer_soon(e, w, EIP1271_INVALID);
        return;
    }
    for (call *c = e->calls; c; c = c->next)
        if (!memcmp(c->key, key, 32)) {
            e->coalesced++;
            w->next = c->waiters;
            c->waiters = w;
            return;
        }
    int code = code_known(e, addr);
    if (code == CODE_NONE) {
        e->no_code++;
        answer_soon(e, w, EIP1271_INVALID);
        return;
    }
    if (e->inflight >= e->max_inflight) {
        e->busy++;
        answer_soon(e, w, EIP1271_BUSY);
        return;
    }
    probe *p = NULL;
    if (code == CODE_UNKNOWN) {
        for (p = e->probes; p && memcmp(p->addr, addr, 20); p = p->next)
            ;
        int64_t wait_s = p ? 0 : cap_take(e);
        if (wait_s > 0) {
            e->capped++;
            w->retry_after = wait_s;
            answer_soon(e, w, EIP1271_CAPPED);
            return;
        }
    }
    call *c = calloc(1, sizeof *c);
    if (c) {
        c->e = e;
        memcpy(c->key, key, 32);
        c->nhashes = n;
        c->body = build_batch(addr, sig, sig_len, hashes, n, &c->body_len);
    }
    if (c && c->body && code == CODE_UNKNOWN && !p)
        p = probe_start(e, addr);
    if (!c || !c->body || (code == CODE_UNKNOWN && !p)) {
        if (c)
            free(c->body);
        free(c);
        e->unavailable++;
        answer_soon(e, w, EIP1271_UNAVAILABLE);
        return;
    }
    c->waiters = w;
    c->next = e->calls;
    e->calls = c;
    e->inflight++;
    if (p) {
        c->next_waiting = p->waiting;
        p->waiting = c;
        return;
    }
    /* Known to hold code: sent now. A failure must not answer inside this call. */
    int rc = httpc_post_json(e->http, e->url, c->body, c->body_len, e->timeout_ms, on_answer, c);
    free(c->body);
    c->body = NULL;
    if (rc != 0) {
        e->calls = c->next;
        e->inflight--;
        free(c);
        e->unavailable++;
        answer_soon(e, w, EIP1271_UNAVAILABLE);
        return;
    }
    e->calls_total++;
}
