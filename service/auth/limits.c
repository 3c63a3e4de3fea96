/* limits: per-address budgets as a GCRA in Redis (lua/rate_limit.lua), one key per address;
 * the write budget taken ahead in leases (lease.h), so that a busy address's writes share one
 * charge. */
#include "auth/limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/lease.h"
#include "core/app.h"
#include "core/metrics.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

#define MAX_ROUTES 64

/* Refused requests by route slot and kind; the route's template is kept beside its count. */
static unsigned long long limited[MAX_ROUTES][LIMITS_KINDS];
static const char *limited_route[MAX_ROUTES];

static const char *const field_of[LIMITS_KINDS] = {"w", "c"};
static const char *const kind_name[LIMITS_KINDS] = {"writes", "creations"};

struct lease_waiter {
    struct lease_waiter *next;
    struct limits *lim;
    request *req;
    limits_done done;
    void *data;
};

enum limits_state { LIMITS_OPEN, LIMITS_CLOSING, LIMITS_CLOSED };

struct limits {
    app *app;
    lease_table table;
    uv_timer_t sweep;
    int state;
    bool leasing;              /* RATE_LEASE_MS > 0: the table is in use */
    bool sweeping;             /* the sweep timer is started */
    unsigned outstanding;      /* lease charges and hand-backs sent, not yet answered */
    void (*closed)(void *ctx); /* limits_close's callback, once outstanding is 0 */
    void *closed_ctx;
    uint64_t charges;  /* write-budget charges sent to Redis (leased or not) */
    uint64_t local;    /* writes admitted from a lease, with no Redis work */
    uint64_t returned; /* leased units handed back unspent */
    uint64_t full;     /* writes charged one by one because the table was full */
};

/* One request's own charge (no lease): its callback's state, in the request's arena. */
typedef struct charge {
    request *req;
    limits_done done;
    void *data;
} charge;

static int64_t per_window(const app *a, int kind)
{
    return kind == LIMITS_WRITES ? a->cfg.rate_writes_per_minute : a->cfg.entity_create_per_day;
}

bool limits_apply(const request *req, int kind, bool platform_admin)
{
    return per_window(req->app, kind) > 0 && !platform_admin;
}

/* Sends rate_limit.lua for n units; mode "take" or "give". */
static void send_charge(app *a, int kind, const char *caller, const char *mode, uint32_t n,
                        store_cb cb, void *data)
{
    /* Microseconds per unit: the window spread evenly over its units. */
    double window_us = kind == LIMITS_WRITES ? 60e6 : 86400e6;
    char key[KEYS_LIMIT_SIZE], interval[32], burst[24], units[16];
    size_t klen = keys_limit(key, caller);
    int ilen = snprintf(interval, sizeof interval, "%.0f", window_us / (double)per_window(a, kind));
    int blen = snprintf(burst, sizeof burst, "%lld", (long long)per_window(a, kind));
    int ulen = snprintf(units, sizeof units, "%u", n);
    const char *argv[] = {key, field_of[kind], interval, burst, mode, units};
    size_t lens[] = {klen, 1, (size_t)ilen, (size_t)blen, strlen(mode), (size_t)ulen};
    store_script(a->store, LUA_RATE_LIMIT, cb, data, 1, 6, argv, lens);
}

/* Reads a take's answer {granted, wait_ms}; false for anything else (nothing was taken). */
static bool read_grant(const redisReply *reply, long long *granted, long long *wait)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_INTEGER)
        return false;
    *granted = reply->element[0]->integer;
    *wait = reply->element[1]->integer;
    return *granted >= 0 && *wait >= 0;
}

static void on_take(void *data, int status, redisReply *reply)
{
    charge *c = data;
    long long granted = 0, wait = 0;
    if (status == STORE_OK && !read_grant(reply, &granted, &wait))
        status = STORE_UNAVAILABLE; /* an error reply: nothing was taken */
    c->done(c->req, c->data, status, granted > 0 ? 0 : wait);
}

/* The request's own charge of one unit, without a lease. */
static void take_one(request *req, int kind, const char *caller, limits_done done, void *data)
{
    charge *c = arena_alloc(&req->pool, sizeof *c);
    if (!c) {
        done(req, data, STORE_UNAVAILABLE, 0);
        return;
    }
    c->req = req;
    c->done = done;
    c->data = data;
    if (kind == LIMITS_WRITES && req->app->limits)
        req->app->limits->charges++;
    send_charge(req->app, kind, caller, "take", 1, on_take, c);
}

static void on_given(void *data, int status, redisReply *reply)
{
    (void)data;
    (void)status;
    (void)reply;
}

static void closed_timer(uv_handle_t *h)
{
    limits *lim = h->data;
    lim->state = LIMITS_CLOSED;
    if (lim->closed)
        lim->closed(lim->closed_ctx);
}

/* A lease charge or hand-back is answered: the last one lets a close finish. */
static void settle(limits *lim)
{
    lim->outstanding--;
    if (lim->state == LIMITS_CLOSING && lim->outstanding == 0 &&
        !uv_is_closing((uv_handle_t *)&lim->sweep))
        uv_close((uv_handle_t *)&lim->sweep, closed_timer);
}

static void on_returned(void *data, int status, redisReply *reply)
{
    (void)status; /* unanswered, the units come back as the budget refills */
    (void)reply;
    settle(data);
}

/* Hands a lease's units back to Redis. */
static void give_back_units(limits *lim, lease *l)
{
    if (!l->units)
        return;
    uint32_t n = l->units;
    l->units = 0;
    lim->returned += n;
    lim->outstanding++;
    send_charge(lim->app, LIMITS_WRITES, l->address, "give", n, on_returned, lim);
}

static void charge_lease(limits *lim, lease *l);

/* Queues a write behind the lease's next charge, in arrival order. */
static void waiter_push(lease *l, struct lease_waiter *w)
{
    w->next = NULL;
    if (l->tail)
        l->tail->next = w;
    else
        l->head = w;
    l->tail = w;
    l->nwaiting++;
}

/* A lease charge's answer: its units go to the waiters in order, the rest stay in the lease. */
static void on_lease_charge(void *data, int status, redisReply *reply)
{
    lease *l = data;
    limits *lim = l->head->lim; /* a charge is sent for a waiter, and waits for its answer */
    long long granted = 0, wait = 0;
    if (status == STORE_OK && !read_grant(reply, &granted, &wait))
        status = STORE_UNAVAILABLE;
    /* The waiters leave the lease before any is answered: an answer may bring the next write
     * of the same address (pipelined), which finds the lease as it now is. */
    struct lease_waiter *w = l->head;
    bool all = granted == (long long)l->asked; /* Redis may hold more */
    l->head = l->tail = NULL;
    l->nwaiting = 0;
    l->asked = 0;
    if (granted > 0) {
        l->units += (uint32_t)granted;
        l->granted_ms = uv_now(lim->app->loop);
    }
    while (w) {
        struct lease_waiter *next = w->next; /* w is in its request's arena */
        if (status != STORE_OK) {
            w->done(w->req, w->data, status, 0);
        } else if (l->units > 0) {
            l->units--;
            w->done(w->req, w->data, STORE_OK, 0);
        } else if (all) {
            /* Joined after the charge was sent: the next charge is theirs. */
            waiter_push(l, w);
        } else {
            w->done(w->req, w->data, STORE_OK, wait > 0 ? wait : 1);
        }
        w = next;
    }
    if (l->head && !l->asked)
        charge_lease(lim, l);
    if (lim->state != LIMITS_OPEN)
        give_back_units(lim, l);
    settle(lim);
}

/* Sends a lease's charge: its waiters' units, or the lease's size when that is more. */
static void charge_lease(limits *lim, lease *l)
{
    uint64_t now = uv_now(lim->app->loop);
    uint32_t cap = lease_cap(lim->app->cfg.rate_writes_per_minute);
    uint32_t size = lease_next_size(l, now, (uint64_t)lim->app->cfg.rate_lease_ms, cap);
    l->asked = l->nwaiting > size ? l->nwaiting : size;
    lim->charges++;
    lim->outstanding++;
    send_charge(lim->app, LIMITS_WRITES, l->address, "take", l->asked, on_lease_charge, l);
}

static void on_sweep(uv_timer_t *t);

void limits_take(request *req, int kind, const char *caller, limits_done done, void *data)
{
    limits *lim = req->app->limits;
    if (kind != LIMITS_WRITES || !lim || !lim->leasing || lim->state != LIMITS_OPEN) {
        take_one(req, kind, caller, done, data);
        return;
    }
    lease *l = lease_find(&lim->table, caller);
    if (!l) {
        l = lease_add(&lim->table, caller);
        if (!l) {
            lim->full++;
            take_one(req, kind, caller, done, data);
            return;
        }
        if (!lim->sweeping) {
            uint64_t every = (uint64_t)lim->app->cfg.rate_lease_ms / 2;
            uv_timer_start(&lim->sweep, on_sweep, every ? every : 1, every ? every : 1);
            lim->sweeping = true;
        }
    }
    l->used_ms = uv_now(lim->app->loop);
    if (l->units > 0) {
        l->units--;
        lim->local++;
        done(req, data, STORE_OK, 0);
        return;
    }
    struct lease_waiter *w = arena_alloc(&req->pool, sizeof *w);
    if (!w) {
        done(req, data, STORE_UNAVAILABLE, 0);
        return;
    }
    *w = (struct lease_waiter){.lim = lim, .req = req, .done = done, .data = data};
    waiter_push(l, w);
    if (!l->asked)
        charge_lease(lim, l);
}

void limits_give(request *req, int kind, const char *caller)
{
    limits *lim = req->app->limits;
    lease *l = kind == LIMITS_WRITES && lim && lim->leasing && lim->state == LIMITS_OPEN
                   ? lease_find(&lim->table, caller)
                   : NULL;
    /* A lease taking one unit at a time hands it straight back, as a write without a lease
     * does: its address writes rarely, and its next write may come on another instance. */
    if (l && l->size > 1) {
        l->units++;
        return;
    }
    send_charge(req->app, kind, caller, "give", 1, on_given, NULL);
}

/* Hands back what leases have held for RATE_LEASE_MS, and forgets the addresses that have
 * not written for as long. */
static void on_sweep(uv_timer_t *t)
{
    limits *lim = t->data;
    uint64_t now = uv_now(lim->app->loop), hold = (uint64_t)lim->app->cfg.rate_lease_ms;
    for (size_t i = 0; i < lim->table.high; i++) {
        lease *l = &lim->table.slots[i];
        if (!l->used || l->asked)
            continue;
        if (l->units && now - l->granted_ms >= hold)
            give_back_units(lim, l);
        if (!l->units && now - l->used_ms >= hold)
            lease_remove(&lim->table, l);
    }
    if (lim->table.count == 0) {
        uv_timer_stop(&lim->sweep);
        lim->sweeping = false;
    }
}

static void limits_render_leases(buf *out, void *ctx)
{
    const limits *lim = ctx;
    uint64_t held = 0;
    for (size_t i = 0; i < lim->table.high; i++)
        if (lim->table.slots[i].used)
            held += lim->table.slots[i].units;
    metrics_gauge(out, "entityd_rate_leases",
                  "Addresses this process keeps a write-budget lease for (at most "
                  "RATE_LEASE_ADDRESSES).",
                  (double)lim->table.count);
    metrics_gauge(out, "entityd_rate_lease_units",
                  "Write-budget units taken from Redis ahead of writes and not yet spent.",
                  (double)held);
    metrics_counter(out, "entityd_rate_budget_charges_total",
                    "Write-budget charges sent to Redis (each takes one unit or a lease's).",
                    lim->charges);
    metrics_counter(out, "entityd_rate_lease_writes_total",
                    "Writes admitted from a lease, with no Redis work.", lim->local);
    metrics_counter(out, "entityd_rate_lease_returned_units_total",
                    "Leased units handed back to Redis unspent.", lim->returned);
    metrics_counter(out, "entityd_rate_lease_full_total",
                    "Writes charged one by one because every lease was taken.", lim->full);
}

int limits_new(limits **out, app *a)
{
    *out = NULL;
    if (a->cfg.rate_writes_per_minute <= 0)
        return 0;
    limits *lim = calloc(1, sizeof *lim);
    if (!lim)
        return -1;
    lim->app = a;
    lim->leasing = a->cfg.rate_lease_ms > 0;
    if (lim->leasing && lease_table_init(&lim->table, (size_t)a->cfg.rate_lease_addresses) != 0) {
        free(lim);
        return -1;
    }
    uv_timer_init(a->loop, &lim->sweep);
    lim->sweep.data = lim;
    metrics_register(limits_render_leases, lim);
    *out = lim;
    return 0;
}

void limits_close(limits *lim, void (*closed)(void *ctx), void *ctx)
{
    if (!lim || lim->state != LIMITS_OPEN) {
        if (closed)
            closed(ctx);
        return;
    }
    lim->state = LIMITS_CLOSING;
    lim->closed = closed;
    lim->closed_ctx = ctx;
    uv_timer_stop(&lim->sweep);
    for (size_t i = 0; i < lim->table.high; i++)
        if (lim->table.slots[i].used && !lim->table.slots[i].asked)
            give_back_units(lim, &lim->table.slots[i]);
    /* A hand-back the store answers at once (not connected) may have closed it already. */
    if (lim->outstanding == 0 && !uv_is_closing((uv_handle_t *)&lim->sweep))
        uv_close((uv_handle_t *)&lim->sweep, closed_timer);
}

void limits_free(limits *lim)
{
    if (!lim)
        return;
    lease_table_deinit(&lim->table);
    free(lim);
}

void limits_refuse(request *req, int kind, int status, long long wait_ms)
{
    if (status == STORE_TIMEOUT) {
        request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        return;
    }
    if (status != STORE_OK) {
        request_fail(req, 503, "unavailable", "The data store is unreachable.", NULL);
        return;
    }
    int slot = req->route_slot;
    if (slot >= 0 && slot < MAX_ROUTES) {
        limited[slot][kind]++;
        limited_route[slot] = req->route_name;
    }
    char msg[160];
    if (kind == LIMITS_WRITES)
        snprintf(msg, sizeof msg,
                 "This address has used its budget of %lld writes per minute; retry later.",
                 (long long)req->app->cfg.rate_writes_per_minute);
    else
        snprintf(msg, sizeof msg,
                 "This address has created its quota of %lld entities per day; retry later.",
                 (long long)req->app->cfg.entity_create_per_day);
    /* Whole seconds, rounded up: a client that waits that long finds a unit free. */
    request_fail_retry(req, 429, "rate_limited", msg, (wait_ms + 999) / 1000);
}

static void limits_render_metrics(buf *out, void *ctx)
{
    (void)ctx;
    metrics_family(out, "entityd_rate_limited_total", "counter",
                   "Requests refused with 429 by route and limit (writes: the write budget, "
                   "creations: the creation quota).");
    for (int i = 0; i < MAX_ROUTES; i++)
        for (int k = 0; k < LIMITS_KINDS; k++)
            if (limited[i][k])
                buf_printf(out, "entityd_rate_limited_total{route=\"%s\",limit=\"%s\"} %llu\n",
                           limited_route[i], kind_name[k], limited[i][k]);
}

void limits_register_metrics(void)
{
    metrics_register(limits_render_metrics, NULL);
}
