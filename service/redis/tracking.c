/* tracking: see tracking.h. A cold path: a handful of commands per connection, then one
 * message per change of a key this process reads through the cache. */
#include "redis/tracking.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/backoff.h"
#include "core/ids.h"
#include "core/log.h"
#include "cache/readcache.h"
#include "redis/cluster_tracking.h"
#include "redis/invalidation.h"
#include "redis/redis_uv.h"
#include "redis/resolve.h"
#include "redis/store.h"

enum state { T_DOWN, T_CONNECTING, T_SUBSCRIBING, T_READY, T_CLOSED };

#define HEARTBEAT_MS   1000
#define SILENCE_MS     3000 /* no heartbeat back for this long: the connection is not trusted */
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 10000 /* an ACL refusing SUBSCRIBE logs once per retry */

struct tracking {
    app *app;
    cluster_tracking *ct; /* cluster mode: the per-node tracking does it all */
    redisAsyncContext *ac;
    int state;
    long long id;      /* this connection's CLIENT ID, once known */
    uint64_t request;  /* numbers the store's CLIENT TRACKING requests; only the latest counts */
    bool pointing;     /* the latest is in flight */
    bool refused;      /* Redis answered it with an error: not asked again on this connection */
    uv_timer_t timer;  /* the reconnect backoff while down, the heartbeat while up */
    resolver resolver; /* the store's host, before each connect */
    backoff backoff;
    uint64_t heard_ms; /* last heartbeat back (or when the cache went on) */
    char channel[64];  /* this process's heartbeat channel */
    tracking_stats stats;
    bool closed_timer;
    char host[256]; /* where this connection went: the store's endpoint then */
    int port;
};

/* A CLIENT TRACKING request in flight: the answer counts only if nothing changed since. */
typedef struct point_req {
    tracking *tr;
    uint64_t request;
} point_req;

static void start_connect(tracking *tr);

static uint64_t now_ms(tracking *tr)
{
    return uv_now(tr->app->loop);
}

static void cache_off(tracking *tr)
{
    tr->request++; /* an answer still in flight no longer turns the cache on */
    tr->pointing = false;
    if (readcache_enabled(tr->app->reads))
        readcache_set_enabled(tr->app->reads, false);
}

static void on_tracking_reply(void *data, int status, redisReply *reply)
{
    point_req *p = data;
    tracking *tr = p->tr;
    bool current = p->request == tr->request && tr->state == T_READY;
    free(p);
    if (!current)
        return;
    tr->pointing = false;
    if (status != STORE_OK)
        return; /* no answer in time, or the connection went: the heartbeat tick asks again */
    if (reply->type == REDIS_REPLY_ERROR) {
        tr->refused = true;
        /* Redis before 6, or an ACL without CLIENT: the service runs without the cache. */
        buf *l = log_begin(LOG_WARN, "read cache off: CLIENT TRACKING refused");
        if (l) {
            log_str(l, "detail", reply->str);
            log_end(l);
        }
        return;
    }
    tr->heard_ms = now_ms(tr);
    readcache_set_enabled(tr->app->reads, true);
    log_event(LOG_INFO, "read cache on", NULL);
}

/* Points the store connection's tracking at this connection, when both are up. */
static void point_store(tracking *tr)
{
    if (tr->state != T_READY || !store_ready(tr->app->store))
        return;
    cache_off(tr);
    point_req *p = malloc(sizeof *p);
    if (!p)
        return;
    p->tr = tr;
    p->request = tr->request;
    tr->pointing = true;
    char id[24];
    snprintf(id, sizeof id, "%lld", tr->id);
    const char *argv[] = {"CLIENT", "TRACKING", "on", "REDIRECT", id, "OPTIN"};
    size_t lens[] = {6, 8, 2, 8, strlen(id), 5};
    store_control(tr->app->store, on_tracking_reply, p, 6, argv, lens);
}

static void drop_connection(tracking *tr, const char *why);

static void on_store(void *ctx, bool ready)
{
    tracking *tr = ctx;
    if (!ready) {
        cache_off(tr);
        return;
    }
    store_endpoint ep = store_get_endpoint(tr->app->store);
    if (tr->ac && (ep.port != tr->port || strcmp(ep.host, tr->host))) {
        /* The store follows a new primary (sentinel mode): so must the invalidations. */
        drop_connection(tr, "the primary moved");
        return;
    }
    point_store(tr);
}

static void on_timer(uv_timer_t *t);

static void schedule_reconnect(tracking *tr)
{
    if (tr->state == T_CLOSED)
        return;
    tr->state = T_DOWN;
    uv_timer_start(&tr->timer, on_timer, backoff_next(&tr->backoff), 0);
}

static void drop_connection(tracking *tr, const char *why)
{
    log_event(LOG_WARN, "read cache off", why);
    cache_off(tr);
    if (tr->ac) {
        redisAsyncContext *ac = tr->ac;
        tr->ac = NULL;
        tr->state = T_DOWN;
        redisAsyncFree(ac); /* on_disconnect schedules the reconnect */
    }
}

static void on_ignored(void *data, int status, redisReply *reply)
{
    (void)data;
    (void)status;
    (void)reply;
}

static void on_timer(uv_timer_t *t)
{
    tracking *tr = t->data;
    if (tr->state == T_DOWN) {
        start_connect(tr);
        return;
    }
    if (tr->state != T_READY)
        return;
    if (readcache_enabled(tr->app->reads) && now_ms(tr) - tr->heard_ms > SILENCE_MS) {
        tr->stats.silences++;
        drop_connection(tr, "the invalidation connection went silent");
        return;
    }
    if (!readcache_enabled(tr->app->reads) && !tr->pointing && !tr->refused) {
        point_store(tr);
        return;
    }
    if (store_ready(tr->app->store)) {
        const char *argv[] = {"PUBLISH", tr->channel, "1"};
        size_t lens[] = {7, strlen(tr->channel), 1};
        store_control(tr->app->store, on_ignored, NULL, 3, argv, lens);
    }
}

static void on_message(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    tracking *tr = privdata;
    redisReply *reply = r;
    if (!reply || tr->state == T_CLOSED)
        return;
    switch (invalidation_read(tr->app->reads, reply, tr->channel, &tr->stats)) {
    case INVALIDATION_ERROR:
        drop_connection(tr, reply->str);
        break;
    case INVALIDATION_SUBSCRIBED: /* both channels confirmed: up */
        if (tr->id > 0) {
            tr->state = T_READY;
            backoff_reset(&tr->backoff);
            uv_timer_start(&tr->timer, on_timer, HEARTBEAT_MS, HEARTBEAT_MS);
            point_store(tr);
        }
        break;
    case INVALIDATION_HEARTBEAT:
        tr->heard_ms = now_ms(tr);
        break;
    default:
        break;
    }
}

static void on_id(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    tracking *tr = privdata;
    redisReply *reply = r;
    if (!reply || tr->state == T_CLOSED)
        return;
    if (reply->type == REDIS_REPLY_INTEGER)
        tr->id = reply->integer;
    else
        drop_connection(tr, reply->type == REDIS_REPLY_ERROR ? reply->str : "CLIENT ID failed");
}

static void on_auth(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    tracking *tr = privdata;
    redisReply *reply = r;
    if (reply && reply->type == REDIS_REPLY_ERROR && tr->state != T_CLOSED)
        drop_connection(tr, reply->str);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    tracking *tr = ac->data;
    if (status != REDIS_OK) {
        tr->ac = NULL; /* hiredis frees the context after this callback */
        schedule_reconnect(tr);
        return;
    }
    tr->state = T_SUBSCRIBING;
    redisAsyncContext *c = tr->ac;
    store_endpoint ep = store_get_endpoint(tr->app->store);
    if (ep.password[0]) {
        if (ep.user[0])
            redisAsyncCommand(c, on_auth, tr, "AUTH %s %s", ep.user, ep.password);
        else
            redisAsyncCommand(c, on_auth, tr, "AUTH %s", ep.password);
    }
    redisAsyncCommand(c, on_id, tr, "CLIENT ID");
    redisAsyncCommand(c, on_message, tr, "SUBSCRIBE %s %s", INVALIDATE_CHANNEL, tr->channel);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    tracking *tr = ac->data;
    tr->ac = NULL;
    cache_off(tr);
    if (tr->state == T_CLOSED)
        return;
    schedule_reconnect(tr);
}

/* Connects to the resolved address: no blocking lookup inside hiredis. The store logs a host
 * that does not resolve; here a failure is only retried. */
static void on_resolved(void *data, int status, const char *numeric)
{
    tracking *tr = data;
    if (tr->state == T_CLOSED)
        return; /* tracking_close ran meanwhile; tr itself lives until tracking_free */
    if (status != 0) {
        schedule_reconnect(tr);
        return;
    }
    store_endpoint ep = store_get_endpoint(tr->app->store);
    snprintf(tr->host, sizeof tr->host, "%s", ep.host);
    tr->port = ep.port;
    tr->ac = redis_uv_connect(tr->app->loop, numeric, ep.port, tr, NULL, on_connect, on_disconnect);
    if (!tr->ac)
        schedule_reconnect(tr);
}

static void start_connect(tracking *tr)
{
    if (tr->state == T_CLOSED)
        return;
    tr->state = T_CONNECTING;
    tr->id = 0;
    tr->refused = false;
    tr->stats.reconnects++;
    resolve_start(&tr->resolver, tr->app->loop, store_get_endpoint(tr->app->store).host,
                  on_resolved, tr);
}

tracking *tracking_new(app *a)
{
    tracking *tr = calloc(1, sizeof *tr);
    if (!tr)
        return NULL;
    tr->app = a;
    if (store_cluster_mode(a->store)) {
        tr->state = T_CLOSED; /* this connection is not used */
        if (!(tr->ct = cluster_tracking_new(a, store_cluster(a->store)))) {
            free(tr);
            return NULL;
        }
        return tr;
    }
    char id[IDS_SIZE];
    if (ids_new(id, 'c') != 0) {
        free(tr);
        return NULL;
    }
    snprintf(tr->channel, sizeof tr->channel, "entityd:heartbeat:%s", id);
    tr->app = a;
    backoff_init(&tr->backoff, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    tr->state = T_DOWN;
    uv_timer_init(a->loop, &tr->timer);
    tr->timer.data = tr;
    store_set_listener(a->store, on_store, tr);
    start_connect(tr);
    return tr;
}

void tracking_close(tracking *tr)
{
    if (tr && tr->ct)
        cluster_tracking_close(tr->ct);
    if (!tr || tr->state == T_CLOSED)
        return;
    tr->state = T_CLOSED;
    store_set_listener(tr->app->store, NULL, NULL);
    cache_off(tr);
    /* A resolution under way still calls back (on_resolved sees T_CLOSED) before the loop
     * ends, and so before tracking_free. */
    resolve_cancel(&tr->resolver);
    if (tr->ac) {
        redisAsyncContext *ac = tr->ac;
        tr->ac = NULL;
        redisAsyncFree(ac);
    }
    uv_close((uv_handle_t *)&tr->timer, NULL);
}

void tracking_free(tracking *tr)
{
    if (tr)
        cluster_tracking_free(tr->ct);
    free(tr);
}

const tracking_stats *tracking_get_stats(const tracking *tr)
{
    return tr->ct ? cluster_tracking_get_stats(tr->ct) : &tr->stats;
}
