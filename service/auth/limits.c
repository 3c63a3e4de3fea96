/* limits: per-address budgets as a GCRA in Redis (lua/rate_limit.lua), one key per address. */
#include "auth/limits.h"

#include <stdio.h>
#include <string.h>

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

typedef struct charge {
    request *req;
    limits_done done;
    void *data;
} charge;

static int64_t per_window(const request *req, int kind)
{
    return kind == LIMITS_WRITES ? req->app->cfg.rate_writes_per_minute
                                 : req->app->cfg.entity_create_per_day;
}

bool limits_apply(const request *req, int kind, bool platform_admin)
{
    return per_window(req, kind) > 0 && !platform_admin;
}

/* Sends rate_limit.lua for one unit; mode "take" or "give". */
static void send_charge(request *req, int kind, const char *caller, const char *mode, store_cb cb,
                        void *data)
{
    /* Microseconds per unit: the window spread evenly over its units. */
    double window_us = kind == LIMITS_WRITES ? 60e6 : 86400e6;
    char key[KEYS_LIMIT_SIZE], interval[32], burst[24];
    size_t klen = keys_limit(key, caller);
    int ilen =
        snprintf(interval, sizeof interval, "%.0f", window_us / (double)per_window(req, kind));
    int blen = snprintf(burst, sizeof burst, "%lld", (long long)per_window(req, kind));
    const char *argv[] = {key, field_of[kind], interval, burst, mode};
    size_t lens[] = {klen, 1, (size_t)ilen, (size_t)blen, strlen(mode)};
    store_script(req->app->store, LUA_RATE_LIMIT, cb, data, 1, 5, argv, lens);
}

static void on_take(void *data, int status, redisReply *reply)
{
    charge *c = data;
    long long wait = 0;
    if (status == STORE_OK) {
        if (reply->type == REDIS_REPLY_INTEGER)
            wait = reply->integer;
        else
            status = STORE_UNAVAILABLE; /* an error reply: nothing was taken */
    }
    c->done(c->req, c->data, status, wait);
}

void limits_take(request *req, int kind, const char *caller, limits_done done, void *data)
{
    charge *c = arena_alloc(&req->pool, sizeof *c);
    if (!c) {
        done(req, data, STORE_UNAVAILABLE, 0);
        return;
    }
    c->req = req;
    c->done = done;
    c->data = data;
    send_charge(req, kind, caller, "take", on_take, c);
}

static void on_given(void *data, int status, redisReply *reply)
{
    (void)data;
    (void)status;
    (void)reply;
}

void limits_give(request *req, int kind, const char *caller)
{
    send_charge(req, kind, caller, "give", on_given, NULL);
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
