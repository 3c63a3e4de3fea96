/* tracking: see tracking.h. A cold path: a few commands per node connection, a heartbeat per
 * node a second, then one message per change of a key this process reads through the cache.
 * One timer drives reconnects, heartbeats and silence checks. */
#include "redis/tracking.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "core/app.h"
#include "core/backoff.h"
#include "core/ids.h"
#include "core/log.h"
#include "cache/readcache.h"
#include "redis/invalidation.h"
#include "redis/redis_uv.h"
#include "redis/resolve.h"
#include "redis/store.h"
#include "redis/transport.h"

enum state { T_DOWN, T_RESOLVING, T_CONNECTING, T_SUBSCRIBING, T_READY };

#define TICK_MS        100
#define HEARTBEAT_MS   1000
#define SILENCE_MS     3000 /* no heartbeat back for this long: the node is not trusted */
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 10000 /* an ACL refusing SUBSCRIBE logs once per retry */

typedef struct tr_node {
    tracking *tr;
    int idx; /* the transport's node number */
    redisAsyncContext *ac;
    int state;
    long long id;      /* this connection's CLIENT ID, once known */
    uint64_t request;  /* numbers CLIENT TRACKING requests; only the latest counts */
    bool pointing;     /* the latest is in flight */
    bool refused;      /* answered with an error: not asked again on this connection */
    bool confirmed;    /* the node's pipelined connection tracks into this one */
    uint64_t heard_ms; /* last heartbeat back (or when tracking was confirmed) */
    uint64_t beat_ms;  /* last heartbeat sent */
    uint64_t retry_at; /* while down: the next connect, after the backoff */
    resolver resolver;
    backoff backoff;
    char host[RESOLVE_HOST_SIZE]; /* where this connection goes: the node's address then */
    int port;
    char channel[96];
} tr_node;

struct tracking {
    app *app;
    bool closed;
    uv_timer_t tick;
    char id[IDS_SIZE];
    tr_node *nodes[TRANSPORT_MAX_NODES];
    tracking_stats stats;
};

typedef struct point_req {
    tr_node *n;
    uint64_t request;
} point_req;

static uint64_t now_ms(const tracking *tr)
{
    return uv_now(tr->app->loop);
}

static void set_cache(tracking *tr, bool on, const char *why)
{
    if (readcache_enabled(tr->app->reads) == on)
        return;
    readcache_set_enabled(tr->app->reads, on);
    log_event(on ? LOG_INFO : LOG_WARN, on ? "read cache on" : "read cache off", why);
}

/* On exactly while every slot has an owner and every owner's tracking is confirmed. */
static void evaluate(tracking *tr, const char *why)
{
    bool owns[TRANSPORT_MAX_NODES];
    store *st = tr->app->store;
    bool on = !tr->closed && store_node_owners(st, owns);
    for (int i = 0; on && i < store_node_count(st); i++)
        if (owns[i] && (!tr->nodes[i] || !tr->nodes[i]->confirmed || !store_node_ready(st, i)))
            on = false;
    set_cache(tr, on, why);
}

/* The node's tracking no longer holds (either connection went, or it was never confirmed on
 * the current pair): answers still in flight for it do not count. */
static void unconfirm(tr_node *n)
{
    n->request++;
    n->pointing = false;
    n->confirmed = false;
    store_node_set_tracked(n->tr->app->store, n->idx, false);
}

static void on_point_reply(void *data, int status, redisReply *reply)
{
    point_req *p = data;
    tr_node *n = p->n;
    tracking *tr = n->tr;
    bool current = p->request == n->request && n->state == T_READY && !tr->closed;
    free(p);
    if (!current)
        return;
    n->pointing = false;
    if (status != STORE_OK)
        return; /* no answer in time, or the connection went: the tick asks again */
    if (reply->type == REDIS_REPLY_ERROR) {
        n->refused = true;
        /* Redis before 6, or an ACL without CLIENT: the service runs without the cache. */
        buf *l = log_begin(LOG_WARN, "read cache off: CLIENT TRACKING refused");
        if (l) {
            log_str(l, "node", n->host);
            log_int(l, "port", n->port);
            log_str(l, "detail", reply->str);
            log_end(l);
        }
        return;
    }
    n->confirmed = true;
    n->heard_ms = n->beat_ms = now_ms(tr);
    store_node_set_tracked(tr->app->store, n->idx, true);
    evaluate(tr, "every node's tracking confirmed");
}

/* Points the node's pipelined connection's tracking at this node's invalidation connection. */
static void point(tr_node *n)
{
    store *st = n->tr->app->store;
    if (n->state != T_READY || n->pointing || n->refused || !store_node_ready(st, n->idx))
        return;
    unconfirm(n);
    point_req *p = malloc(sizeof *p);
    if (!p)
        return;
    p->n = n;
    p->request = n->request;
    n->pointing = true;
    char id[24];
    snprintf(id, sizeof id, "%lld", n->id);
    const char *argv[] = {"CLIENT", "TRACKING", "on", "REDIRECT", id, "OPTIN"};
    size_t lens[] = {6, 8, 2, 8, strlen(id), 5};
    store_node_control(st, n->idx, on_point_reply, p, 6, argv, lens);
}

static void schedule_retry(tr_node *n)
{
    n->state = T_DOWN;
    n->retry_at = now_ms(n->tr) + backoff_next(&n->backoff);
}

static void drop(tr_node *n, const char *why)
{
    unconfirm(n);
    evaluate(n->tr, why);
    if (n->ac) {
        redisAsyncContext *ac = n->ac;
        n->ac = NULL;
        redisAsyncFree(ac); /* on_disconnect sees it was dropped on purpose */
    }
    schedule_retry(n);
}

static void on_message(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    tr_node *n = privdata;
    tracking *tr = n->tr;
    redisReply *reply = r;
    if (!reply || tr->closed)
        return;
    /* A nil key list (that node was flushed) empties the whole cache. */
    switch (invalidation_read(tr->app->reads, reply, n->channel, &tr->stats)) {
    case INVALIDATION_ERROR:
        drop(n, reply->str);
        break;
    case INVALIDATION_SUBSCRIBED: /* both channels confirmed: up */
        if (n->id > 0) {
            n->state = T_READY;
            backoff_reset(&n->backoff);
            point(n);
        }
        break;
    case INVALIDATION_HEARTBEAT:
        n->heard_ms = now_ms(tr);
        break;
    default:
        break;
    }
}

static void on_id(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    tr_node *n = privdata;
    redisReply *reply = r;
    if (!reply || n->tr->closed)
        return;
    if (reply->type == REDIS_REPLY_INTEGER)
        n->id = reply->integer;
    else
        drop(n, reply->type == REDIS_REPLY_ERROR ? reply->str : "CLIENT ID failed");
}

static void on_auth(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    tr_node *n = privdata;
    redisReply *reply = r;
    if (reply && reply->type == REDIS_REPLY_ERROR && !n->tr->closed)
        drop(n, reply->str);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    tr_node *n = ac->data;
    if (status != REDIS_OK) {
        n->ac = NULL; /* hiredis frees the context after this callback */
        schedule_retry(n);
        return;
    }
    n->state = T_SUBSCRIBING;
    redisAsyncContext *c = n->ac;
    store_endpoint at = store_node_at(n->tr->app->store, n->idx);
    if (at.password[0]) {
        if (at.user[0])
            redisAsyncCommand(c, on_auth, n, "AUTH %s %s", at.user, at.password);
        else
            redisAsyncCommand(c, on_auth, n, "AUTH %s", at.password);
    }
    redisAsyncCommand(c, on_id, n, "CLIENT ID");
    redisAsyncCommand(c, on_message, n, "SUBSCRIBE %s %s", INVALIDATE_CHANNEL, n->channel);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    tr_node *n = ac->data;
    bool was = n->ac == ac;
    if (was)
        n->ac = NULL;
    if (n->tr->closed || !was)
        return; /* dropped on purpose: drop() has done the rest */
    unconfirm(n);
    evaluate(n->tr, "a node's invalidation connection went");
    schedule_retry(n);
}

/* Connects to the resolved address: no blocking lookup inside hiredis. The store logs a host
 * that does not resolve; here a failure is only retried. */
static void on_resolved(void *data, int status, const char *numeric)
{
    tr_node *n = data;
    tracking *tr = n->tr;
    if (tr->closed || n->state != T_RESOLVING)
        return; /* closed or dropped meanwhile; n itself lives until tracking_free */
    if (status != 0) {
        schedule_retry(n);
        return;
    }
    n->state = T_CONNECTING;
    n->ac = redis_uv_connect(tr->app->loop, numeric, n->port, n, NULL, on_connect, on_disconnect);
    if (!n->ac)
        schedule_retry(n);
}

static void start_connect(tr_node *n)
{
    store_endpoint at = store_node_at(n->tr->app->store, n->idx);
    snprintf(n->host, sizeof n->host, "%s", at.host);
    n->port = at.port;
    n->state = T_RESOLVING;
    n->id = 0;
    n->refused = false;
    n->tr->stats.reconnects++;
    resolve_start(&n->resolver, n->tr->app->loop, n->host, on_resolved, n);
}

/* The node's address changed under its invalidation connection (the primary the sentinels
 * name moved): that connection no longer hears the node's keys. */
static bool moved(const tr_node *n)
{
    store_endpoint at = store_node_at(n->tr->app->store, n->idx);
    return n->state != T_DOWN && (at.port != n->port || strcmp(at.host, n->host));
}

static tr_node *node_get(tracking *tr, int idx)
{
    if (tr->nodes[idx])
        return tr->nodes[idx];
    tr_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->tr = tr;
    n->idx = idx;
    n->state = T_DOWN;
    backoff_init(&n->backoff, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    snprintf(n->channel, sizeof n->channel, "entityd:heartbeat:%s:%d", tr->id, idx);
    tr->nodes[idx] = n;
    return n;
}

static void on_ignored(void *data, int status, redisReply *reply)
{
    (void)data;
    (void)status;
    (void)reply;
}

/* Connects to every owner whose pipelined connection is up, points, beats, and watches for
 * silence; then decides whether the cache is on. */
static void sweep(tracking *tr)
{
    if (tr->closed)
        return;
    store *st = tr->app->store;
    uint64_t now = now_ms(tr);
    bool owns[TRANSPORT_MAX_NODES];
    store_node_owners(st, owns);
    for (int i = 0; i < store_node_count(st); i++) {
        tr_node *n = owns[i] ? node_get(tr, i) : tr->nodes[i];
        if (!n)
            continue;
        bool up = store_node_ready(st, i);
        if (n->state == T_DOWN && owns[i] && up && now >= n->retry_at &&
            !resolve_busy(&n->resolver)) {
            start_connect(n);
            continue;
        }
        if (n->state != T_READY)
            continue;
        if (n->confirmed && now - n->heard_ms > SILENCE_MS) {
            tr->stats.silences++;
            drop(n, "a node's invalidation connection went silent");
            continue;
        }
        if (!n->confirmed) {
            point(n);
        } else if (up && now - n->beat_ms >= HEARTBEAT_MS) {
            n->beat_ms = now;
            const char *argv[] = {"PUBLISH", n->channel, "1"};
            size_t lens[] = {7, strlen(n->channel), 1};
            store_node_control(st, i, on_ignored, NULL, 3, argv, lens);
        }
    }
    evaluate(tr, "a node that owns slots has no confirmed tracking");
}

static void on_tick(uv_timer_t *t)
{
    sweep(t->data);
}

static void on_node(void *ctx, int event, int node)
{
    tracking *tr = ctx;
    if (tr->closed)
        return;
    /* A map change may name no node. */
    tr_node *n = event == TRANSPORT_MAP_CHANGED ? NULL : tr->nodes[node];
    if (event == TRANSPORT_MAP_CHANGED) {
        /* A slot changed owner: answers the old owner would have invalidated are dropped. */
        if (readcache_enabled(tr->app->reads))
            readcache_flush(tr->app->reads);
    } else if (n && event == TRANSPORT_NODE_READY && moved(n)) {
        drop(n, "the primary moved");
    } else if (n) {
        /* A new or lost pipelined connection: tracking must be set up on it again. */
        unconfirm(n);
    }
    sweep(tr);
}

/* store_set_fresh's drain: the invalidations already in a subscribed connection's socket are
 * read now, not when the loop gets to that socket, so that a request checking a credential
 * after Redis announced its end never finds it kept. A socket with nothing waiting costs one
 * ioctl. */
static void tracking_drain(void *ctx)
{
    tracking *tr = ctx;
    for (int i = 0; i < TRANSPORT_MAX_NODES; i++) {
        tr_node *n = tr->nodes[i];
        int waiting = 0;
        if (n && n->ac && n->state >= T_SUBSCRIBING && n->ac->c.fd >= 0 &&
            ioctl(n->ac->c.fd, FIONREAD, &waiting) == 0 && waiting > 0)
            redisAsyncHandleRead(n->ac);
    }
}

tracking *tracking_new(app *a)
{
    tracking *tr = calloc(1, sizeof *tr);
    if (!tr)
        return NULL;
    if (ids_new(tr->id, 'c') != 0) {
        free(tr);
        return NULL;
    }
    tr->app = a;
    uv_timer_init(a->loop, &tr->tick);
    tr->tick.data = tr;
    uv_timer_start(&tr->tick, on_tick, TICK_MS, TICK_MS);
    store_node_listen(a->store, on_node, tr);
    store_set_fresh(a->store, tracking_drain, tr);
    return tr;
}

void tracking_close(tracking *tr)
{
    if (!tr || tr->closed)
        return;
    tr->closed = true;
    store_node_listen(tr->app->store, NULL, NULL);
    store_set_fresh(tr->app->store, NULL, NULL);
    set_cache(tr, false, "closing");
    for (int i = 0; i < TRANSPORT_MAX_NODES; i++) {
        tr_node *n = tr->nodes[i];
        if (!n)
            continue;
        /* A resolution under way still calls back (on_resolved sees closed) before the loop
         * ends, and so before tracking_free. */
        resolve_cancel(&n->resolver);
        if (n->ac) {
            redisAsyncContext *ac = n->ac;
            n->ac = NULL;
            redisAsyncFree(ac);
        }
    }
    uv_close((uv_handle_t *)&tr->tick, NULL);
}

void tracking_free(tracking *tr)
{
    if (!tr)
        return;
    for (int i = 0; i < TRANSPORT_MAX_NODES; i++)
        free(tr->nodes[i]);
    free(tr);
}

const tracking_stats *tracking_get_stats(const tracking *tr)
{
    return &tr->stats;
}
