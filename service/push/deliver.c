/* deliver: which endpoints this instance delivers to, through leases, and when it asks for
 * their next deliveries (webhook.h). */
#include "push/webhook.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/isotime.h"
#include "core/log.h"
#include "core/metrics.h"
#include "push/deliver_platform.h"
#include "push/hook.h"
#include "push/send.h"
#include "push/watch.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "rpc/httpc.h"

/* Entries of the webhooks set read per round trip of a pass. */
#define DELIVER_PAGE 256
/* Events one take reads past the cursor at most (those the endpoint does not subscribe to
 * included). */
#define DELIVER_SCAN "256"
/* An entry whose endpoint does not exist is dropped after this: an endpoint is written after
 * its entry, within the store's deadlines of it. */
#define DELIVER_MISSING_GRACE_MS 60000
/* Deliveries claimed ahead of the in-flight limit at most; fewer while attempts are slow
 * (batch_size). */
#define DELIVER_BATCH 64
/* While the set is empty, it is looked at this often (a create or an update here kicks a pass
 * at once): an idle instance sends Redis one command per 10 s, not one per poll. */
#define DELIVER_IDLE_MS 10000

static uint64_t poll_ms(const webhooks *w)
{
    /* at least three renewals per lease, so one lost answer does not lose it */
    int64_t p = w->a->cfg.webhook_poll_ms, l = w->a->cfg.webhook_lease_ms / 3;
    return (uint64_t)(p < l ? p : l);
}

static void take(hook *h);

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

static void on_wake(void *data, const char *entity_id)
{
    (void)entity_id;
    take(data); /* nothing when the lease is not ours */
}

/* Wakes h when its entity's events may have grown (push/watch.h), on whichever instance wrote
 * them: an award is taken within a round trip of its write, not at the next pass. Without a
 * subscription (out of memory) each pass still takes for every endpoint held. */
static void wake_subscribe(hook *h)
{
    if (h->w->a->watch)
        h->sub = watch_subscribe(h->w->a->watch, h->eid, on_wake, h);
}

static hook *hook_find(webhooks *w, const char *eid, const char *wid)
{
    for (hook *h = w->hooks; h; h = h->next)
        if (!strcmp(h->eid, eid) && !strcmp(h->wid, wid))
            return h;
    return NULL;
}

static void entity_attempt_done(hook *h);
static void entity_release(hook *h);
static void unclaim(hook *h);

static const hook_ops entity_ops = {
    .attempt_done = entity_attempt_done,
    .release = entity_release,
    .unclaim = unclaim,
};

static hook *hook_add(webhooks *w, const char *eid, const char *wid)
{
    hook *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->w = w;
    h->ops = &entity_ops;
    h->qtail = &h->queue;
    h->attempt_ms = (double)w->a->cfg.webhook_timeout_ms; /* one at a time until measured */
    snprintf(h->eid, sizeof h->eid, "%s", eid);
    snprintf(h->wid, sizeof h->wid, "%s", wid);
    keys_webhooks(h->hooks, eid);
    keys_webhook(h->wh, eid, wid, "");
    entity_keys k;
    keys_entity(&k, eid);
    memcpy(h->entity, k.entity, k.entity_len + 1);
    memcpy(h->events, k.events, k.events_len + 1);
    h->next = w->hooks;
    w->hooks = h;
    wake_subscribe(h);
    return h;
}

static void hook_unlink_free(hook *h)
{
    webhooks *w = h->w;
    for (hook **p = &w->hooks; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    hook_free(h);
}

static void entity_release(hook *h)
{
    h->calls--;
    if (h->dropped && h->calls == 0)
        hook_unlink_free(h);
}

/* The entry is gone (or goes now): this instance stops delivering to it. */
static void hook_drop(hook *h)
{
    h->dropped = true;
    h->held = false;
    watch_unsubscribe(h->sub);
    h->sub = NULL;
    hook_queue_free(h);
    if (h->calls == 0)
        hook_unlink_free(h);
}

static void remove_entry(webhooks *w, const hook *h)
{
    char entry[IDS_SIZE + WEBHOOK_ID_SIZE + 2];
    int n = snprintf(entry, sizeof entry, "%s:%s", h->eid, h->wid);
    const char *argv[] = {"ZREM", KEYS_WEBHOOKS_ALL, entry};
    size_t lens[] = {4, strlen(KEYS_WEBHOOKS_ALL), (size_t)n};
    store_command(w->a->store, on_ignored, NULL, 3, argv, lens);
}

/* GONE (the entity deleted: at once) or MISSING (after the grace period). */
static void hook_absent(hook *h, bool entity_gone)
{
    uint64_t now = uv_now(h->w->a->loop);
    if (!entity_gone) {
        if (!h->missing_since)
            h->missing_since = now;
        if (now - h->missing_since < DELIVER_MISSING_GRACE_MS)
            return;
    }
    remove_entry(h->w, h);
    hook_drop(h);
}

/* ---- taking deliveries ---- */

static uint64_t hold_ms(const webhooks *w)
{
    return (uint64_t)(w->a->cfg.webhook_timeout_ms + w->a->cfg.webhook_lease_ms);
}

/* Deliveries to claim ahead: as many as start well within the hold at the attempts' pace (a
 * claimed delivery not started before its hold ends is made again by whoever holds the lease
 * then), at least the in-flight limit, at most DELIVER_BATCH more than it. */
static size_t batch_size(const hook *h)
{
    size_t limit = (size_t)h->w->a->cfg.webhook_inflight;
    double fits = (double)hold_ms(h->w) / 4.0 / h->attempt_ms * (double)limit;
    size_t cap = DELIVER_BATCH + limit;
    size_t b = fits >= (double)cap ? cap : (size_t)fits;
    return b > limit ? b : limit;
}

static void on_unclaimed(void *data, int status, redisReply *r)
{
    (void)status, (void)r;
    hook_release(data);
}

static void unclaim(hook *h)
{
    if (!h->queued) {
        return;
    }
    /* Scores 1, 2, …: due long ago, so the next take gives them back first, in their order. */
    size_t n = 3 + 2 * h->queued;
    const char **argv = calloc(n, sizeof *argv);
    size_t *lens = calloc(n, sizeof *lens);
    char(*scores)[BUF_INT_SIZE] = calloc(h->queued, sizeof *scores);
    char due[KEYS_WEBHOOK_SIZE + 8];
    if (argv && lens && scores) {
        snprintf(due, sizeof due, "%s:due", h->wh);
        argv[0] = "ZADD", argv[1] = due, argv[2] = "XX";
        size_t i = 0;
        for (taken *t = h->queue; t; t = t->next, i++) {
            buf_format_int(scores[i], (long long)(i + 1));
            argv[3 + 2 * i] = scores[i];
            argv[4 + 2 * i] = t->id;
        }
        for (size_t k = 0; k < n; k++)
            lens[k] = strlen(argv[k]);
        h->calls++;
        store_command(h->w->a->store, on_unclaimed, h, (int)n, argv, lens);
    }
    /* without memory for the command they are due after the hold instead */
    free(argv);
    free(lens);
    free(scores);
    hook_queue_free(h);
}

static bool may_send(const hook *h)
{
    uint64_t now = uv_now(h->w->a->loop);
    return !h->w->closed && !h->dropped && h->held && now < h->held_until && now >= h->paused_until;
}

/* Starts queued attempts while there is room. */
static void pump(hook *h)
{
    int64_t limit = h->w->a->cfg.webhook_inflight;
    uint64_t stale = hold_ms(h->w) / 2;
    while (h->queue && h->inflight < limit && may_send(h)) {
        taken *t = h->queue;
        if (uv_now(h->w->a->loop) - t->at > stale) {
            unclaim(h);
            return;
        }
        h->queue = t->next;
        if (!h->queue)
            h->qtail = &h->queue;
        h->queued--;
        send_start(h, t);
    }
}

static void on_take(void *data, int status, redisReply *r)
{
    hook *h = data;
    h->taking = false;
    webhooks *w = h->w;
    if (w->closed || h->dropped) {
        hook_release(h);
        return;
    }
    const redisReply *head =
        r && r->type == REDIS_REPLY_ARRAY && r->elements ? r->element[0] : NULL;
    size_t asked = h->asked;
    if (status != STORE_OK || !head) {
        hook_log_error("webhook take failed", status, r);
    } else if (hook_reply_is(head, "OK") && hook_take_ok(r)) {
        h->off = false;
        h->missing_since = 0;
        h->oldest_pending = strtoll(r->element[3]->str, NULL, 10);
        hook_take_target(h, r->element[1], r->element[2]);
        size_t items = r->elements - 4;
        for (size_t i = 4; i < r->elements; i++) {
            taken *t = send_prepare(h, r->element[i]);
            if (!t)
                continue;
            *h->qtail = t;
            h->qtail = &t->next;
            h->queued++;
        }
        /* a full take may have left more behind */
        if (items > 0 && items >= asked)
            h->again = true;
    } else if (hook_reply_is(head, "LOST")) {
        h->held = false;
        unclaim(h);
    } else if (hook_reply_is(head, "OFF")) {
        h->off = true;
        unclaim(h);
    } else if (hook_reply_is(head, "PAUSED") && r->elements == 2 &&
               r->element[1]->type == REDIS_REPLY_INTEGER) {
        h->paused_until = uv_now(w->a->loop) + (uint64_t)r->element[1]->integer;
        unclaim(h);
    } else if (hook_reply_is(head, "GONE") || hook_reply_is(head, "MISSING")) {
        bool gone = hook_reply_is(head, "GONE");
        hook_release(h);
        hook_absent(h, gone);
        return;
    }
    bool again = h->again;
    h->again = false;
    pump(h);
    hook_release(h);
    if (again)
        take(h);
}

/* Starts what is queued, then claims more once the queue is down to half a batch: the next
 * take's round trip overlaps the attempts still queued. */
static void take(hook *h)
{
    webhooks *w = h->w;
    if (!may_send(h))
        return;
    pump(h);
    if (h->taking) {
        h->again = true;
        return;
    }
    size_t batch = batch_size(h), busy = h->queued + (size_t)h->inflight;
    if (busy >= batch || (h->queued && h->queued * 2 > batch))
        return;
    size_t want = batch - busy;
    const config *c = &w->a->cfg;
    char n[BUF_INT_SIZE], hold[BUF_INT_SIZE], logmax[BUF_INT_SIZE], limits[2 * BUF_INT_SIZE + 2];
    buf_format_int(n, (long long)want);
    buf_format_int(hold, (long long)hold_ms(w));
    buf_format_int(logmax, (long long)c->webhook_log_max);
    snprintf(limits, sizeof limits, "%lld:%lld", (long long)c->events_max,
             (long long)c->events_max_bytes);
    const char *argv[] = {h->entity, h->hooks, h->wh, h->events, h->wid, w->token,
                          h->eid,    n,        hold,  logmax,    limits, DELIVER_SCAN};
    size_t lens[12];
    for (size_t i = 0; i < 12; i++)
        lens[i] = strlen(argv[i]);
    h->taking = true;
    h->asked = want;
    h->calls++;
    store_script(w->a->store, LUA_WH_TAKE, on_take, h, 4, 12, argv, lens);
}

static void entity_attempt_done(hook *h)
{
    h->inflight--;
    if (!h->w->closed && !h->dropped)
        take(h);
}

/* ---- leases ---- */

typedef struct lease_call {
    hook *h;
    uint64_t sent;
} lease_call;

static void on_lease(void *data, int status, redisReply *r)
{
    lease_call *lc = data;
    hook *h = lc->h;
    uint64_t sent = lc->sent;
    free(lc);
    webhooks *w = h->w;
    if (w->closed || h->dropped) {
        hook_release(h);
        return;
    }
    if (status == STORE_OK && hook_reply_is(r, "HELD")) {
        h->held = true;
        h->missing_since = 0;
        /* counted from the send: the lease began no earlier in Redis's time */
        h->held_until = sent + (uint64_t)w->a->cfg.webhook_lease_ms * 9 / 10;
        hook_release(h);
        take(h);
        return;
    }
    if (status == STORE_OK && hook_reply_is(r, "BUSY")) {
        h->held = false;
    } else if (status == STORE_OK && (hook_reply_is(r, "GONE") || hook_reply_is(r, "MISSING"))) {
        h->held = false;
        hook_release(h);
        hook_absent(h, hook_reply_is(r, "GONE"));
        return;
    } else {
        hook_log_error("webhook lease failed", status, r);
    }
    hook_release(h);
}

static void lease(hook *h)
{
    webhooks *w = h->w;
    lease_call *lc = malloc(sizeof *lc);
    if (!lc)
        return;
    lc->h = h;
    lc->sent = uv_now(w->a->loop);
    char ms[BUF_INT_SIZE];
    buf_format_int(ms, (long long)w->a->cfg.webhook_lease_ms);
    const char *argv[] = {h->entity, h->hooks, h->wh, h->wid, w->token, ms, "0"};
    size_t lens[7];
    for (size_t i = 0; i < 7; i++)
        lens[i] = strlen(argv[i]);
    h->calls++;
    store_script(w->a->store, LUA_WH_LEASE, on_lease, lc, 3, 7, argv, lens);
}

/* ---- the pass over the webhooks set ---- */

static void scan_page(webhooks *w);

static void on_timer(uv_timer_t *t);

/* The next pass: after poll_ms, or DELIVER_IDLE_MS while no endpoint is listed. */
static void schedule_pass(webhooks *w)
{
    if (w->closed)
        return;
    uint64_t poll = poll_ms(w), idle = poll > DELIVER_IDLE_MS ? poll : DELIVER_IDLE_MS;
    uint64_t ms = w->kicked ? 0 : w->hooks || w->phooks ? poll : idle;
    w->kicked = false;
    uv_timer_start(&w->timer, on_timer, ms, 0);
}

static void pass_end(webhooks *w)
{
    w->scanning = false;
    w->scan_from[0] = '\0';
    /* endpoints whose entries went: their deliveries stop here */
    for (hook *h = w->hooks, *next; h; h = next) {
        next = h->next;
        if (!h->dropped && h->pass != w->pass)
            hook_drop(h);
    }
    schedule_pass(w);
}

static void on_page(void *data, int status, redisReply *r)
{
    webhooks *w = data;
    if (w->closed)
        return;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY) {
        hook_log_error("webhook endpoints not listed", status, r);
        w->scanning = false; /* the next poll starts the pass again */
        w->scan_from[0] = '\0';
        uv_timer_start(&w->timer, on_timer, poll_ms(w), 0);
        return;
    }
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_STRING)
            continue;
        if (e->len >= sizeof w->scan_from) {
            /* no entry of ours: the pass goes on past every entry of this prefix */
            memcpy(w->scan_from, e->str, sizeof w->scan_from - 2);
            w->scan_from[sizeof w->scan_from - 2] = '\xff';
            w->scan_from[sizeof w->scan_from - 1] = '\0';
            continue;
        }
        memcpy(w->scan_from, e->str, e->len + 1);
        const char *colon = memchr(e->str, ':', e->len);
        /* platform endpoints ("platform:<wid>") are read from their hash instead
         * (deliver_platform.c) */
        if (!colon || !ids_valid(e->str, (size_t)(colon - e->str), 'c') ||
            !webhook_id_valid(colon + 1, e->len - (size_t)(colon + 1 - e->str)))
            continue;
        char eid[IDS_SIZE];
        memcpy(eid, e->str, IDS_SIZE - 1);
        eid[IDS_SIZE - 1] = '\0';
        hook *h = hook_find(w, eid, colon + 1);
        if (!h)
            h = hook_add(w, eid, colon + 1);
        if (!h)
            continue;
        h->pass = w->pass;
        lease(h);
    }
    if (r->elements < DELIVER_PAGE)
        pass_end(w);
    else
        scan_page(w);
}

static void scan_page(webhooks *w)
{
    char from[sizeof w->scan_from + 1], page[BUF_INT_SIZE];
    int flen = w->scan_from[0] ? snprintf(from, sizeof from, "(%s", w->scan_from)
                               : snprintf(from, sizeof from, "-");
    buf_format_int(page, DELIVER_PAGE);
    const char *argv[] = {"ZRANGE", KEYS_WEBHOOKS_ALL, from, "+", "BYLEX", "LIMIT", "0", page};
    size_t lens[8];
    for (size_t i = 0; i < 8; i++)
        lens[i] = strlen(argv[i]);
    lens[2] = (size_t)flen;
    store_command(w->a->store, on_page, w, 8, argv, lens);
}

static void on_timer(uv_timer_t *t)
{
    webhooks *w = t->data;
    if (w->closed || w->scanning)
        return;
    if (!store_ready(w->a->store)) {
        uv_timer_start(&w->timer, on_timer, poll_ms(w), 0);
        return;
    }
    w->scanning = true;
    w->pass++;
    deliver_platform_pass(w);
    scan_page(w);
}

void webhooks_kick(webhooks *w)
{
    if (!w || w->closed)
        return;
    if (w->scanning) {
        w->kicked = true;
        return;
    }
    uv_timer_start(&w->timer, on_timer, 0, 0);
}

webhooks *webhooks_new(app *a)
{
    webhooks *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->a = a;
    char err[128];
    w->nschedule =
        config_schedule_parse(a->cfg.webhook_retry_schedule, w->schedule, CONFIG_SCHEDULE_MAX);
    if (w->nschedule < 0 || ids_new(w->token, 'c') != 0 ||
        httpc_new(&w->http, a->loop, err, sizeof err) != 0) {
        free(w);
        return NULL;
    }
    uv_timer_init(a->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, on_timer, poll_ms(w), 0);
    return w;
}

void webhooks_close(webhooks *w)
{
    if (!w || w->closed)
        return;
    w->closed = true;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, NULL);
    httpc_close(w->http);
}

void webhooks_free(webhooks *w)
{
    if (!w)
        return;
    httpc_free(w->http);
    deliver_platform_free(w);
    for (hook *h = w->hooks, *next; h; h = next) {
        next = h->next;
        hook_free(h);
    }
    free(w);
}

void webhooks_render_metrics(buf *out, void *ctx)
{
    const webhooks *w = ctx;
    if (!w)
        return;
    size_t held = 0, off = 0;
    int64_t oldest = 0;
    for (const hook *h = w->hooks; h; h = h->next) {
        if (!h->held || h->dropped)
            continue;
        held++;
        off += h->off;
        if (h->oldest_pending && (!oldest || h->oldest_pending < oldest))
            oldest = h->oldest_pending;
    }
    deliver_platform_count(w, &held, &off);
    const metrics_labelled by[] = {{"succeeded", w->stats.succeeded},
                                   {"retried", w->stats.retried},
                                   {"failed", w->stats.failed}};
    metrics_counter_by(out, "entityd_webhook_deliveries_total",
                       "webhook delivery attempts this process made, by outcome (retried: failed "
                       "and due again; failed: failed for good)",
                       "outcome", by, 3);
    metrics_gauge(
        out, "entityd_webhook_endpoints_held",
        "webhook endpoints (the platform's included) whose delivery lease this process holds",
        (double)held);
    metrics_gauge(out, "entityd_webhook_endpoints_disabled",
                  "disabled webhook endpoints among those this process holds", (double)off);
    int64_t now = isotime_now_ms();
    metrics_gauge(out, "entityd_webhook_oldest_pending_seconds",
                  "age of the oldest pending delivery (among the ten due soonest) of the "
                  "endpoints this process holds; 0: none",
                  oldest && now > oldest ? (double)(now - oldest) / 1000.0 : 0.0);
    metrics_counter(out, "entityd_webhook_disabled_total",
                    "webhook endpoints this process disabled (410, or failing too long)",
                    w->stats.disabled_by_us);
    metrics_counter(out, "entityd_webhook_refused_total",
                    "delivery attempts refused at connect time by the address guard",
                    w->stats.refused);
}
