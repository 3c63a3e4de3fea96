/* eip1271: contract-wallet signatures checked by eth_call of isValidSignature(bytes32,bytes).
 *
 * One check is one HTTP request holding a JSON-RPC batch: one eth_call per candidate hash (the
 * sign-in messages a caller may have signed), so a check costs one round trip whatever the
 * message. Checks of the same (address, signature) in flight share that request; a refusal is
 * remembered for REFUSAL_MS so a repeated bad signature costs the RPC nothing; an acceptance is
 * kept by the caller (auth's signature cache) for the signature's life. */
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

/* Latency buckets (seconds) of the calls. */
static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NBUCKETS (sizeof buckets / sizeof buckets[0])

typedef struct call {
    eip1271 *e;
    uint8_t key[32];
    eip1271_waiter *waiters;
    int nhashes;
    struct call *next;
} call;

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
    refusal *refusals;
    uv_timer_t soon; /* delivers the answers known at once, on the next turn */
    eip1271_waiter *ready, **ready_tail;
    bool closed;
    /* metrics */
    uint64_t calls_total, coalesced, refusals_remembered, busy;
    uint64_t valid, invalid, unavailable, timeouts;
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
    metrics_family(out, "entityd_eth_rpc_checks_total", "counter",
                   "EIP-1271 checks by outcome (coalesced and remembered ones sent no call).");
    const struct {
        const char *name;
        uint64_t v;
    } outcomes[] = {{"valid", e->valid},
                    {"invalid", e->invalid},
                    {"unavailable", e->unavailable},
                    {"timeout", e->timeouts},
                    {"busy", e->busy},
                    {"coalesced", e->coalesced},
                    {"refusal_remembered", e->refusals_remembered}};
    for (size_t i = 0; i < sizeof outcomes / sizeof outcomes[0]; i++)
        buf_printf(out, "entityd_eth_rpc_checks_total{outcome=\"%s\"} %llu\n", outcomes[i].name,
                   (unsigned long long)outcomes[i].v);
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

int eip1271_new(eip1271 **out, uv_loop_t *loop, const char *url, int64_t timeout_ms,
                int64_t max_inflight, char *err, size_t err_len)
{
    eip1271 *e = calloc(1, sizeof *e);
    if (!e || !(e->url = strdup(url)) ||
        !(e->refusals = calloc(REFUSAL_SLOTS, sizeof *e->refusals))) {
        if (e)
            free(e->url);
        free(e);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    if (httpc_new(&e->http, loop, err, err_len) != 0) {
        free(e->refusals);
        free(e->url);
        free(e);
        return -1;
    }
    e->loop = loop;
    uv_timer_init(loop, &e->soon);
    e->soon.data = e;
    e->ready_tail = &e->ready;
    e->timeout_ms = (long)timeout_ms;
    e->max_inflight = max_inflight;
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

void eip1271_check(eip1271 *e, const uint8_t key[32], const uint8_t addr[20], const uint8_t *sig,
                   size_t sig_len, const uint8_t (*hashes)[32], int n, eip1271_waiter *w)
{
    w->next = NULL;
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
    if (e->inflight >= e->max_inflight) {
        e->busy++;
        answer_soon(e, w, EIP1271_BUSY);
        return;
    }
    call *c = calloc(1, sizeof *c);
    size_t len = 0;
    char *body = c ? build_batch(addr, sig, sig_len, hashes, n, &len) : NULL;
    if (c) {
        c->e = e;
        memcpy(c->key, key, 32);
        c->waiters = w;
        c->nhashes = n;
    }
    if (!body || httpc_post_json(e->http, e->url, body, len, e->timeout_ms, on_answer, c) != 0) {
        free(body);
        free(c);
        e->unavailable++;
        answer_soon(e, w, EIP1271_UNAVAILABLE);
        return;
    }
    free(body);
    c->next = e->calls;
    e->calls = c;
    e->inflight++;
    e->calls_total++;
}
