/* cluster_tracking: see cluster_tracking.h. A cold path: a few commands per node connection,
 * a heartbeat per node a second, then one message per change of a key this process reads
 * through the cache. One timer drives reconnects, heartbeats and silence checks. */
#include "redis/cluster_tracking.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/backoff.h"
#include "core/ids.h"
#include "core/log.h"
#include "cache/readcache.h"
#include "redis/invalidation.h"
#include "redis/redis_uv.h"
#include "redis/resolve.h"

enum state { T_DOWN, T_RESOLVING, T_CONNECTING, T_SUBSCRIBING, T_READY };

#define TICK_MS        100
#define HEARTBEAT_MS   1000
#define SILENCE_MS     3000 /* no heartbeat back for this long: the node is not trusted */
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 10000

typedef struct ct_node {
    cluster_tracking *ct;
    int idx; /* the cluster's node number */
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
    char channel[96];
} ct_node;

struct cluster_tracking {
    app *app;
    cluster *cl;
    bool closed;
    uv_timer_t tick;
    char id[IDS_SIZE];
    ct_node *nodes[CLUSTER_MAX_NODES];
    tracking_stats stats;
};

typedef struct point_req {
    ct_node *n;
    uint64_t request;
} point_req;

static uint64_t now_ms(const cluster_tracking *ct)
{
    return uv_now(ct->app->loop);
}

static void set_cache(cluster_tracking *ct, bool on, const char *why)
{
    if (readcache_enabled(ct->app->reads) == on)
        return;
    readcache_set_enabled(ct->app->reads, on);
    log_event(on ? LOG_INFO : LOG_WARN, on ? "read cache on" : "read cache off", why);
}

/* On exactly while the map covers every slot and every owner's tracking is confirmed. */
static void evaluate(cluster_tracking *ct, const char *why)
{
    bool owns[CLUSTER_MAX_NODES];
    bool on = !ct->closed && cluster_owners(ct->cl, owns);
    for (int i = 0; on && i < cluster_node_count(ct->cl); i++)
        if (owns[i] &&
            (!ct->nodes[i] || !ct->nodes[i]->confirmed || !cluster_node_ready(ct->cl, i)))
            on = false;
    set_cache(ct, on, why);
}

/* The node's tracking no longer holds (either connection went, or it was never confirmed on
 * the current pair): answers still in flight for it do not count. */
static void unconfirm(ct_node *n)
{
    n->request++;
    n->pointing = false;
    n->confirmed = false;
    cluster_node_set_tracked(n->ct->cl, n->idx, false);
}

static void on_point_reply(void *data, int status, redisReply *reply)
{
    point_req *p = data;
    ct_node *n = p->n;
    cluster_tracking *ct = n->ct;
    bool current = p->request == n->request && n->state == T_READY && !ct->closed;
    free(p);
    if (!current)
        return;
    n->pointing = false;
    if (status != STORE_OK)
        return; /* the tick asks again */
    if (reply->type == REDIS_REPLY_ERROR) {
        n->refused = true;
        buf *l = log_begin(LOG_WARN, "read cache off: CLIENT TRACKING refused");
        if (l) {
            log_str(l, "node", cluster_node_host(ct->cl, n->idx));
            log_int(l, "port", cluster_node_port(ct->cl, n->idx));
            log_str(l, "detail", reply->str);
            log_end(l);
        }
        return;
    }
    n->confirmed = true;
    n->heard_ms = n->beat_ms = now_ms(ct);
    cluster_node_set_tracked(ct->cl, n->idx, true);
    evaluate(ct, "every node's tracking confirmed");
}

/* Points the node's pipelined connection's tracking at this node's invalidation connection. */
static void point(ct_node *n)
{
    cluster_tracking *ct = n->ct;
    if (n->state != T_READY || n->pointing || n->refused || !cluster_node_ready(ct->cl, n->idx))
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
    cluster_node_control(ct->cl, n->idx, on_point_reply, p, 6, argv, lens);
}

static void schedule_retry(ct_node *n)
{
    n->state = T_DOWN;
    n->retry_at = now_ms(n->ct) + backoff_next(&n->backoff);
}

static void drop(ct_node *n, const char *why)
{
    unconfirm(n);
    evaluate(n->ct, why);
    if (n->ac) {
        redisAsyncContext *ac = n->ac;
        n->ac = NULL;
        redisAsyncFree(ac); /* on_disconnect schedules the retry */
    }
    schedule_retry(n);
}

static void on_message(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    ct_node *n = privdata;
    cluster_tracking *ct = n->ct;
    redisReply *reply = r;
    if (!reply || ct->closed)
        return;
    /* A nil key list (that node was flushed) empties the whole cache. */
    switch (invalidation_read(ct->app->reads, reply, n->channel, &ct->stats)) {
    case INVALIDATION_ERROR:
        drop(n, reply->str);
        break;
    case INVALIDATION_SUBSCRIBED:
        if (n->id > 0) {
            n->state = T_READY;
            backoff_reset(&n->backoff);
            point(n);
        }
        break;
    case INVALIDATION_HEARTBEAT:
        n->heard_ms = now_ms(ct);
        break;
    default:
        break;
    }
}

static void on_id(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    ct_node *n = privdata;
    redisReply *reply = r;
    if (!reply || n->ct->closed)
        return;
    if (reply->type == REDIS_REPLY_INTEGER)
        n->id = reply->integer;
    else
        drop(n, reply->type == REDIS_REPLY_ERROR ? reply->str : "CLIENT ID failed");
}

static void on_auth(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    ct_node *n = privdata;
    redisReply *reply = r;
    if (reply && reply->type == REDIS_REPLY_ERROR && !n->ct->closed)
        drop(n, reply->str);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    ct_node *n = ac->data;
    if (status != REDIS_OK) {
        n->ac = NULL; /* hiredis frees the context after this callback */
        schedule_retry(n);
        return;
    }
    n->state = T_SUBSCRIBING;
    redisAsyncContext *c = n->ac;
    const config *cfg = &n->ct->app->cfg;
    if (cfg->redis_password && cfg->redis_password[0]) {
        if (cfg->redis_username && cfg->redis_username[0])
            redisAsyncCommand(c, on_auth, n, "AUTH %s %s", cfg->redis_username,
                              cfg->redis_password);
        else
            redisAsyncCommand(c, on_auth, n, "AUTH %s", cfg->redis_password);
    }
    redisAsyncCommand(c, on_id, n, "CLIENT ID");
    redisAsyncCommand(c, on_message, n, "SUBSCRIBE %s %s", INVALIDATE_CHANNEL, n->channel);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    ct_node *n = ac->data;
    bool was = n->ac == ac;
    if (was)
        n->ac = NULL;
    if (n->ct->closed || !was)
        return; /* dropped on purpose: drop() has done the rest */
    unconfirm(n);
    evaluate(n->ct, "a node's invalidation connection went");
    schedule_retry(n);
}

static void on_resolved(void *data, int status, const char *numeric)
{
    ct_node *n = data;
    cluster_tracking *ct = n->ct;
    if (ct->closed || n->state != T_RESOLVING)
        return; /* closed meanwhile; n itself lives until cluster_tracking_free */
    if (status != 0) {
        schedule_retry(n);
        return;
    }
    n->state = T_CONNECTING;
    n->ac = redis_uv_connect(ct->app->loop, numeric, cluster_node_port(ct->cl, n->idx), n, NULL,
                             on_connect, on_disconnect);
    if (!n->ac)
        schedule_retry(n);
}

static void start_connect(ct_node *n)
{
    n->state = T_RESOLVING;
    n->id = 0;
    n->refused = false;
    n->ct->stats.reconnects++;
    resolve_start(&n->resolver, n->ct->app->loop, cluster_node_host(n->ct->cl, n->idx), on_resolved,
                  n);
}

static ct_node *node_get(cluster_tracking *ct, int idx)
{
    if (ct->nodes[idx])
        return ct->nodes[idx];
    ct_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->ct = ct;
    n->idx = idx;
    n->state = T_DOWN;
    backoff_init(&n->backoff, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    snprintf(n->channel, sizeof n->channel, "entityd:heartbeat:%s:%d", ct->id, idx);
    ct->nodes[idx] = n;
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
static void sweep(cluster_tracking *ct)
{
    if (ct->closed)
        return;
    uint64_t now = now_ms(ct);
    bool owns[CLUSTER_MAX_NODES];
    cluster_owners(ct->cl, owns);
    for (int i = 0; i < cluster_node_count(ct->cl); i++) {
        ct_node *n = owns[i] ? node_get(ct, i) : ct->nodes[i];
        if (!n)
            continue;
        bool up = cluster_node_ready(ct->cl, i);
        if (n->state == T_DOWN && owns[i] && up && now >= n->retry_at) {
            start_connect(n);
            continue;
        }
        if (n->state != T_READY)
            continue;
        if (n->confirmed && now - n->heard_ms > SILENCE_MS) {
            ct->stats.silences++;
            drop(n, "a node's invalidation connection went silent");
            continue;
        }
        if (!n->confirmed) {
            point(n);
        } else if (up && now - n->beat_ms >= HEARTBEAT_MS) {
            n->beat_ms = now;
            const char *argv[] = {"PUBLISH", n->channel, "1"};
            size_t lens[] = {7, strlen(n->channel), 1};
            cluster_node_control(ct->cl, i, on_ignored, NULL, 3, argv, lens);
        }
    }
    evaluate(ct, "a node that owns slots has no confirmed tracking");
}

static void on_tick(uv_timer_t *t)
{
    sweep(t->data);
}

static void on_cluster(void *ctx, int event, int node)
{
    cluster_tracking *ct = ctx;
    if (ct->closed)
        return;
    switch (event) {
    case CLUSTER_NODE_READY:
    case CLUSTER_NODE_DOWN:
        /* A new or lost pipelined connection: tracking must be set up on it again. */
        if (ct->nodes[node])
            unconfirm(ct->nodes[node]);
        break;
    case CLUSTER_MAP_CHANGED:
        /* A slot changed owner: answers the old owner would have invalidated are dropped. */
        if (readcache_enabled(ct->app->reads))
            readcache_flush(ct->app->reads);
        break;
    }
    sweep(ct);
}

cluster_tracking *cluster_tracking_new(app *a, cluster *cl)
{
    cluster_tracking *ct = calloc(1, sizeof *ct);
    if (!ct)
        return NULL;
    if (ids_new(ct->id, 'c') != 0) {
        free(ct);
        return NULL;
    }
    ct->app = a;
    ct->cl = cl;
    uv_timer_init(a->loop, &ct->tick);
    ct->tick.data = ct;
    uv_timer_start(&ct->tick, on_tick, TICK_MS, TICK_MS);
    cluster_set_listener(cl, on_cluster, ct);
    return ct;
}

void cluster_tracking_close(cluster_tracking *ct)
{
    if (!ct || ct->closed)
        return;
    ct->closed = true;
    cluster_set_listener(ct->cl, NULL, NULL);
    set_cache(ct, false, "closing");
    for (int i = 0; i < CLUSTER_MAX_NODES; i++) {
        ct_node *n = ct->nodes[i];
        if (!n)
            continue;
        /* A resolution under way still calls back (on_resolved sees closed) before the loop
         * ends, and so before cluster_tracking_free. */
        resolve_cancel(&n->resolver);
        if (n->ac) {
            redisAsyncContext *ac = n->ac;
            n->ac = NULL;
            redisAsyncFree(ac);
        }
    }
    uv_close((uv_handle_t *)&ct->tick, NULL);
}

void cluster_tracking_free(cluster_tracking *ct)
{
    if (!ct)
        return;
    for (int i = 0; i < CLUSTER_MAX_NODES; i++)
        free(ct->nodes[i]);
    free(ct);
}

const tracking_stats *cluster_tracking_get_stats(const cluster_tracking *ct)
{
    return &ct->stats;
}
