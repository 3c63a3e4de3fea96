/* joinread: join rules' chain reads, one aggregate3 eth_call per chain and read.
 *
 * A read is split into parts, one per chain its rule names; each part is one HTTP request to
 * that chain's URL holding one eth_call, so every value of a chain comes from the block its
 * getBlockNumber answered. Each part takes a token of its chain's bucket
 * (JOIN_RPC_MAX_PER_SECOND, up to one second's worth): a foreground read (a check, a join)
 * takes all of its tokens at once or none, and is answered CAPPED with the wait when one is
 * missing; a background read (the re-check) leaves its parts waiting, in order of arrival, until
 * their chains have room, so the sweep slows down instead of failing. Parts in flight are
 * bounded by ETH_RPC_MAX_INFLIGHT, like the rate: foreground past it is CAPPED, background
 * waits.
 *
 * Every answer is delivered from a zero timer, on a later loop turn than joinread_start's. */
#include "rpc/joinread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "crypto/address.h"
#include "crypto/hex.h"
#include "rpc/httpc.h"
#include "rpc/joinbatch.h"

/* Background reads waiting for room at once; past it joinread_start refuses. */
#define QUEUE_MAX 256

typedef struct chain {
    uint64_t id;
    char *url;
    double tokens;
    uint64_t tokens_at_ms;
} chain;

enum part_state { PART_WAITING, PART_SENT, PART_DONE };

typedef struct read read;

typedef struct part {
    read *r;
    int ci;    /* the chain, in joinread's list */
    int slot;  /* its place in the answer's chain[] */
    int state; /* enum part_state */
    joinbatch batch;
} part;

struct read {
    joinread *j;
    read *next;
    joinread_cb cb;
    void *data;
    bool background;
    int nleaves;
    joinbatch_leaf leaf[JOINREAD_MAX_LEAVES];
    uint8_t (*addrs)[20];
    joinread_value *v;
    joinread_answer ans;
    int nparts, open; /* parts, and those not done */
    part parts[JOINREAD_MAX_CHAINS];
};

struct joinread {
    uv_loop_t *loop;
    httpc *http;
    uint8_t multicall[20];
    long timeout_ms;
    int64_t max_inflight, inflight;
    double rate;
    int nchains;
    chain chains[JOINREAD_MAX_CHAINS];
    read *reads, **reads_tail; /* running, in order of arrival */
    read *ready, **ready_tail; /* answered, waiting for the next turn */
    int waiting;               /* background reads with a part waiting */
    uv_timer_t soon, wake;
    bool closed;
    uint64_t calls_total, ok, unavailable, timeouts, capped;
};

static void render_metrics(buf *out, void *ctx)
{
    const joinread *j = ctx;
    metrics_counter(out, "entityd_join_rpc_calls_total",
                    "eth_calls of join rules (one aggregate3 per chain and read).", j->calls_total);
    const metrics_labelled outcomes[] = {{"ok", j->ok},
                                         {"unavailable", j->unavailable},
                                         {"timeout", j->timeouts},
                                         {"capped", j->capped}};
    metrics_counter_by(out, "entityd_join_rpc_reads_total",
                       "Join rules' chain calls by outcome (capped: a check or join refused by "
                       "JOIN_RPC_MAX_PER_SECOND, no call sent).",
                       "outcome", outcomes, sizeof outcomes / sizeof outcomes[0]);
    metrics_gauge(out, "entityd_join_rpc_inflight", "Join rules' eth_calls in flight.",
                  (double)j->inflight);
    metrics_gauge(out, "entityd_join_rpc_waiting",
                  "Background join reads waiting for JOIN_RPC_MAX_PER_SECOND's room.",
                  (double)j->waiting);
}

int joinread_new(joinread **out, uv_loop_t *loop, const struct config *cfg, char *err,
                 size_t err_len)
{
    config_rpc_url urls[CONFIG_RPC_URLS_MAX];
    int n = config_rpc_urls(cfg, urls, err, err_len);
    if (n < 0)
        return -1;
    joinread *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    const char *mc = cfg->multicall3_address;
    if (address_parse(mc, strlen(mc), j->multicall) != 0) {
        free(j);
        snprintf(err, err_len, "MULTICALL3_ADDRESS must be 0x and 40 hex digits");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        chain *c = &j->chains[j->nchains];
        if (!(c->url = strndup(urls[i].url, urls[i].len))) {
            for (int k = 0; k < j->nchains; k++)
                free(j->chains[k].url);
            free(j);
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        c->id = urls[i].chain;
        c->tokens = (double)cfg->join_rpc_max_per_second;
        c->tokens_at_ms = uv_now(loop);
        j->nchains++;
    }
    if (httpc_new(&j->http, loop, err, err_len) != 0) {
        for (int k = 0; k < j->nchains; k++)
            free(j->chains[k].url);
        free(j);
        return -1;
    }
    j->loop = loop;
    j->timeout_ms = (long)cfg->eth_rpc_timeout_ms;
    j->max_inflight = cfg->eth_rpc_max_inflight;
    j->rate = (double)cfg->join_rpc_max_per_second;
    j->reads_tail = &j->reads;
    j->ready_tail = &j->ready;
    uv_timer_init(loop, &j->soon);
    uv_timer_init(loop, &j->wake);
    j->soon.data = j;
    j->wake.data = j;
    metrics_register(render_metrics, j);
    *out = j;
    return 0;
}

static int chain_index(const joinread *j, uint64_t id)
{
    for (int i = 0; i < j->nchains; i++)
        if (j->chains[i].id == id)
            return i;
    return -1;
}

bool joinread_chain_known(void *ctx, uint64_t id)
{
    return chain_index(ctx, id) >= 0;
}

bool joinread_has_chain_leaves(const joinread_rule *r)
{
    for (int i = 0; i < r->leaves && i < JOINREAD_MAX_LEAVES; i++)
        if (r->leaf[i].kind != JOINREAD_LEAF_OTHER)
            return true;
    return false;
}

/* Refills c's bucket for the time gone by: at most one second's worth. */
static void cap_refill(joinread *j, chain *c)
{
    uint64_t now = uv_now(j->loop);
    c->tokens += (double)(now - c->tokens_at_ms) * j->rate / 1000.0;
    if (c->tokens > j->rate)
        c->tokens = j->rate;
    c->tokens_at_ms = now;
}

/* Milliseconds until c has a token (0: it has one now). */
static uint64_t cap_wait_ms(joinread *j, chain *c)
{
    cap_refill(j, c);
    if (c->tokens >= 1)
        return 0;
    return (uint64_t)((1 - c->tokens) * 1000.0 / j->rate) + 1;
}

static void free_read(read *r)
{
    for (int i = 0; i < r->nparts; i++)
        joinbatch_free(&r->parts[i].batch);
    free(r->addrs);
    free(r->v);
    free(r);
}

static void deliver_ready(joinread *j)
{
    while (j->ready) {
        read *r = j->ready;
        j->ready = r->next;
        if (!j->ready)
            j->ready_tail = &j->ready;
        r->ans.v = r->v;
        r->cb(r->data, &r->ans);
        free_read(r);
    }
}

static void on_soon(uv_timer_t *t)
{
    deliver_ready(t->data);
}

/* Moves r from the running reads to those answered on the next turn. */
static void read_finish(read *r)
{
    joinread *j = r->j;
    for (read **p = &j->reads; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            if (!*p)
                j->reads_tail = p;
            break;
        }
    r->next = NULL;
    *j->ready_tail = r;
    j->ready_tail = &r->next;
    if (!j->closed)
        uv_timer_start(&j->soon, on_soon, 0, 0);
}

/* A part ended: its chain's values are in (or err, with fail). */
static void part_done(part *p, bool fail)
{
    read *r = p->r;
    if (p->state == PART_SENT)
        r->j->inflight--;
    p->state = PART_DONE;
    if (fail) {
        r->ans.status = JOINREAD_UNAVAILABLE;
        r->ans.block[p->slot] = 0;
    }
    if (--r->open == 0)
        read_finish(r);
}

/* The eth_call's answer: the hex of aggregate3's return data, read into the part's values.
 * Returns 0, or -1 when it is no such answer. */
static int read_answer(part *p, const char *body, size_t len)
{
    read *r = p->r;
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *result = json_object_get(root, "result");
    const char *hex = json_string_value(result);
    size_t hex_len = json_string_length(result);
    int rc = -1;
    uint8_t *bytes = NULL;
    multicall_result *res = NULL;
    if (hex && hex_len >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X') &&
        hex_len % 2 == 0 && (bytes = malloc(hex_len / 2 + 1)) &&
        (res = calloc(p->batch.ncalls, sizeof *res)) &&
        hex_decode(hex + 2, hex_len - 2, bytes, hex_len / 2 - 1) == 0 &&
        multicall_decode(bytes, hex_len / 2 - 1, res, p->batch.ncalls) == 0)
        rc = joinbatch_read(&p->batch, r->leaf, r->nleaves, (const uint8_t(*)[20])r->addrs, res,
                            r->v, &r->ans.block[p->slot]);
    free(res);
    free(bytes);
    json_decref(root);
    return rc;
}

static void on_answer(void *data, const httpc_result *hr)
{
    part *p = data;
    joinread *j = p->r->j;
    if (hr->status == HTTPC_TIMEOUT) {
        j->timeouts++;
        log_event(LOG_WARN, "join rules: a chain did not answer in time", hr->error);
        part_done(p, true);
        return;
    }
    if (hr->status != HTTPC_OK || hr->http_code != 200) {
        j->unavailable++;
        char why[160];
        if (hr->status == HTTPC_OK)
            snprintf(why, sizeof why, "HTTP status %ld", hr->http_code);
        log_event(LOG_WARN, "join rules: a chain's call failed",
                  hr->status == HTTPC_OK ? why : hr->error);
        part_done(p, true);
        return;
    }
    if (read_answer(p, hr->body, hr->body_len) != 0) {
        j->unavailable++;
        log_event(LOG_WARN, "join rules: a chain's answer cannot be read", NULL);
        part_done(p, true);
        return;
    }
    j->ok++;
    part_done(p, false);
}

/* Sends p's eth_call (its token taken); a request that cannot start fails the part. */
static void part_send(part *p)
{
    joinread *j = p->r->j;
    buf data = {0}, body = {0};
    char to[ADDRESS_STRING_SIZE];
    address_format_lower(j->multicall, to);
    int rc = multicall_encode(p->batch.calls, p->batch.ncalls, &data);
    rc |= buf_printf(&body,
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_call\",\"params\":[{\"to\":"
                     "\"%s\",\"data\":\"",
                     to);
    rc |= buf_append(&body, data.data, data.len);
    rc |= buf_append_str(&body, "\"},\"latest\"]}");
    buf_free(&data);
    httpc_opts opts = {.body_limit = joinbatch_answer_bound(p->batch.ncalls) + 4096};
    p->state = PART_SENT;
    j->inflight++;
    if (rc != 0 || httpc_post(j->http, j->chains[p->ci].url, body.data, body.len, j->timeout_ms,
                              &opts, on_answer, p) != 0) {
        j->unavailable++;
        part_done(p, true);
    } else {
        j->calls_total++;
    }
    buf_free(&body);
}

static bool read_waits(const read *r)
{
    for (int i = 0; i < r->nparts; i++)
        if (r->parts[i].state == PART_WAITING)
            return true;
    return false;
}

static void on_wake(uv_timer_t *t);

/* Sends the background parts whose chains have room, in order of arrival, and sets the wake
 * timer for the first room to come. */
static void pump(joinread *j)
{
    uint64_t next = 0;
    for (read *r = j->reads, *after; r; r = after) {
        after = r->next;
        if (!read_waits(r))
            continue;
        for (int i = 0; i < r->nparts; i++) {
            part *p = &r->parts[i];
            if (p->state != PART_WAITING)
                continue;
            uint64_t wait = cap_wait_ms(j, &j->chains[p->ci]);
            if (!wait && j->inflight >= j->max_inflight)
                wait = 50; /* an answer makes room; look again soon */
            if (wait) {
                next = !next || wait < next ? wait : next;
                continue;
            }
            j->chains[p->ci].tokens -= 1;
            part_send(p);
        }
        if (!read_waits(r))
            j->waiting--;
    }
    if (next && !j->closed)
        uv_timer_start(&j->wake, on_wake, next, 0);
}

static void on_wake(uv_timer_t *t)
{
    pump(t->data);
}

/* A foreground read: every part's token now, or CAPPED with the longest wait. */
static void start_foreground(joinread *j, read *r)
{
    uint64_t wait = 0;
    for (int i = 0; i < r->nparts; i++) {
        uint64_t w = cap_wait_ms(j, &j->chains[r->parts[i].ci]);
        wait = w > wait ? w : wait;
    }
    if (!wait && j->inflight + r->nparts > j->max_inflight)
        wait = 1000;
    if (wait) {
        j->capped++;
        r->ans.status = JOINREAD_CAPPED;
        r->ans.retry_after = (int64_t)((wait + 999) / 1000);
        for (int i = 0; i < r->nparts; i++)
            r->parts[i].state = PART_DONE;
        r->open = 0;
        read_finish(r);
        return;
    }
    for (int i = 0; i < r->nparts; i++)
        j->chains[r->parts[i].ci].tokens -= 1;
    for (int i = 0; i < r->nparts && !j->closed; i++)
        part_send(&r->parts[i]);
}

/* The read's parts, one per chain its leaves name, in the order of their first leaf. Returns
 * 0, or -1 when a leaf names a chain without a URL or memory runs out. */
static int read_plan(joinread *j, read *r, size_t n)
{
    for (int i = 0; i < r->nleaves; i++) {
        const joinbatch_leaf *l = &r->leaf[i];
        if (l->kind == JOINREAD_LEAF_OTHER)
            continue;
        int ci = chain_index(j, l->chain), k = 0;
        if (ci < 0)
            return -1;
        while (k < r->nparts && r->parts[k].ci != ci)
            k++;
        if (k < r->nparts)
            continue;
        part *p = &r->parts[r->nparts++];
        p->r = r;
        p->ci = ci;
        p->slot = k;
        p->state = PART_WAITING;
        r->ans.chain[k] = l->chain;
        if (joinbatch_build(&p->batch, r->leaf, r->nleaves, l->chain, j->multicall,
                            (const uint8_t(*)[20])r->addrs, n) != 0)
            return -1;
    }
    r->ans.nchains = r->nparts;
    r->open = r->nparts;
    return 0;
}

int joinread_start(joinread *j, const joinread_rule *rule, const uint8_t (*addrs)[20], size_t n,
                   bool background, joinread_cb cb, void *data)
{
    if (j->closed || n == 0 || n > JOINREAD_MAX_ADDRS || rule->leaves < 0 ||
        rule->leaves > JOINREAD_MAX_LEAVES || (background && j->waiting >= QUEUE_MAX))
        return -1;
    read *r = calloc(1, sizeof *r);
    size_t nv = n * (size_t)(rule->leaves ? rule->leaves : 1);
    if (!r || !(r->addrs = malloc(n * 20)) || !(r->v = calloc(nv, sizeof *r->v))) {
        if (r)
            free(r->addrs);
        free(r);
        return -1;
    }
    memcpy(r->addrs, addrs, n * 20);
    for (size_t i = 0; i < nv; i++)
        r->v[i].truth = JOINREAD_ERROR;
    r->j = j;
    r->cb = cb;
    r->data = data;
    r->background = background;
    r->nleaves = rule->leaves;
    r->ans.status = JOINREAD_OK;
    r->ans.naddrs = n;
    r->ans.nleaves = rule->leaves;
    if (joinbatch_parse(rule, r->leaf) != 0 || read_plan(j, r, n) != 0) {
        free_read(r);
        return -1;
    }
    *j->reads_tail = r;
    j->reads_tail = &r->next;
    if (r->nparts == 0) {
        read_finish(r);
    } else if (background) {
        j->waiting++;
        pump(j);
    } else {
        start_foreground(j, r);
    }
    return 0;
}

void joinread_close(joinread *j)
{
    if (!j || j->closed)
        return;
    j->closed = true;
    /* Parts in flight fail through their callbacks; those waiting fail here. */
    httpc_close(j->http);
    while (j->reads) {
        read *r = j->reads;
        for (int i = 0; i < r->nparts && j->reads == r; i++)
            if (r->parts[i].state == PART_WAITING)
                part_done(&r->parts[i], true);
        if (j->reads == r) /* no part waiting, none in flight: cannot be, but never loop */
            read_finish(r);
    }
    j->waiting = 0;
    deliver_ready(j);
    uv_timer_stop(&j->soon);
    uv_timer_stop(&j->wake);
    uv_close((uv_handle_t *)&j->soon, NULL);
    uv_close((uv_handle_t *)&j->wake, NULL);
}

void joinread_free(joinread *j)
{
    if (!j)
        return;
    httpc_free(j->http);
    for (int i = 0; i < j->nchains; i++)
        free(j->chains[i].url);
    free(j);
}
