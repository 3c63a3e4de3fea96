/* cluster_node: the nodes of a Redis Cluster: the slot map (CLUSTER SLOTS, asked once per
 * burst), and each node's one pipelined connection (resolve, connect, AUTH and the scripts,
 * reconnect with backoff). The units that go over them are cluster.c's.
 *
 * Nodes are created from the seeds and from what CLUSTER SLOTS and redirects name, and live
 * until cluster_free: a pointer to one stays valid, and an old primary that comes back as a
 * replica is simply connected and unused. */
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/buf.h"
#include "core/log.h"
#include "core/metrics.h"
#include "redis/cluster_int.h"
#include "redis/lua_scripts.h"
#include "redis/redis_uv.h"
#include "redis/reply.h"

static void node_connect(cl_node *n);
static void on_slots(redisAsyncContext *ac, void *r, void *privdata);

static void node_on_retry(uv_timer_t *t)
{
    node_connect(t->data);
}

void cluster_notify(cluster *cl, int event, int node)
{
    if (cl->listener && !cl->closed)
        cl->listener(cl->listener_ctx, event, node);
}

static cl_node *node_find(cluster *cl, const char *host, int port)
{
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->port == port && !strcmp(cl->nodes[i]->host, host))
            return cl->nodes[i];
    return NULL;
}

/* The node at host:port, made and connecting when new; NULL when the table is full. */
cl_node *cluster_node_get(cluster *cl, const char *host, int port)
{
    cl_node *n = node_find(cl, host, port);
    if (n || cl->nnodes == CLUSTER_MAX_NODES || strlen(host) >= HOST_SIZE || cl->closed)
        return n;
    if (!(n = calloc(1, sizeof *n)))
        return NULL;
    n->cl = cl;
    n->idx = cl->nnodes;
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
    snprintf(n->name, sizeof n->name, "%s:%d", host, port);
    n->state = N_DOWN;
    link_retry_init(&n->retry, cl->app->loop, n);
    cl->nodes[cl->nnodes++] = n;
    node_connect(n);
    return n;
}

/* Asks a connected node for the slot map; one question at a time, and at most one per
 * REFRESH_MIN_MS: the MOVED answers of a burst ask once, and one more after it. */
void cluster_refresh(cluster *cl)
{
    if (cl->closed)
        return;
    uint64_t now = uv_now(cl->app->loop);
    if (cl->refresh_busy || now - cl->refresh_last_ms < REFRESH_MIN_MS) {
        cl->refresh_again = true; /* the tick asks when the time has come */
        return;
    }
    /* Primaries of the current map first: a replica learns of a moved slot by gossip, later,
     * and its answer could undo what a MOVED just taught. Any connected node otherwise. */
    bool primary[CLUSTER_MAX_NODES] = {false};
    for (int s = 0; s < SLOT_COUNT; s++)
        if (cl->map[s] != NO_NODE)
            primary[cl->map[s]] = true;
    for (int k = 0; k < 2 * cl->nnodes; k++) {
        cl_node *n = cl->nodes[(cl->refresh_rr + k) % cl->nnodes];
        if (n->state != N_READY || (k < cl->nnodes && cl->covered && !primary[n->idx]))
            continue;
        static const char *argv[] = {"CLUSTER", "SLOTS"};
        static const size_t lens[] = {7, 5};
        if (link_send(n->ac, on_slots, n, 2, argv, lens) != REDIS_OK)
            continue;
        if (!n->outstanding++)
            n->last_progress_ms = now;
        cl->refresh_rr = n->idx + 1;
        cl->refresh_busy = true;
        cl->refresh_again = false;
        cl->refresh_started_ms = cl->refresh_last_ms = now;
        cl->refreshes++;
        return;
    }
    cl->refresh_again = true; /* no node connected: asked when one is */
}

static bool element_is(const redisReply *r, int type)
{
    return r && r->type == type;
}

/* CLUSTER SLOTS: [[start, end, [host, port, id...], replicas...]...]. The map is replaced
 * only by a well-formed answer. */
static void apply_slots(cluster *cl, const cl_node *from, const redisReply *reply)
{
    if (!element_is(reply, REDIS_REPLY_ARRAY))
        return;
    static int16_t map[SLOT_COUNT];
    for (int s = 0; s < SLOT_COUNT; s++)
        map[s] = NO_NODE;
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *e = reply->element[i];
        if (!element_is(e, REDIS_REPLY_ARRAY) || e->elements < 3 ||
            !element_is(e->element[0], REDIS_REPLY_INTEGER) ||
            !element_is(e->element[1], REDIS_REPLY_INTEGER) ||
            !element_is(e->element[2], REDIS_REPLY_ARRAY) || e->element[2]->elements < 2 ||
            !element_is(e->element[2]->element[0], REDIS_REPLY_STRING) ||
            !element_is(e->element[2]->element[1], REDIS_REPLY_INTEGER))
            return;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        const redisReply *h = e->element[2]->element[0];
        long long port = e->element[2]->element[1]->integer;
        if (lo < 0 || hi >= SLOT_COUNT || lo > hi || port < 1 || port > 65535 ||
            h->len >= HOST_SIZE)
            return;
        char host[HOST_SIZE];
        /* An empty or "?" host: the node asked is the one to use with that port. */
        if (h->len == 0 || (h->len == 1 && h->str[0] == '?'))
            snprintf(host, sizeof host, "%s", from->host);
        else {
            memcpy(host, h->str, h->len);
            host[h->len] = '\0';
        }
        cl_node *n = cluster_node_get(cl, host, (int)port);
        if (!n)
            return;
        for (long long s = lo; s <= hi; s++)
            map[s] = (int16_t)n->idx;
    }
    int covered = 0;
    for (int s = 0; s < SLOT_COUNT; s++)
        covered += map[s] != NO_NODE;
    bool changed = memcmp(cl->map, map, sizeof map) != 0;
    memcpy(cl->map, map, sizeof map);
    if (covered != cl->covered) {
        buf *l = log_begin(covered == SLOT_COUNT ? LOG_INFO : LOG_WARN, "redis cluster slot map");
        if (l) {
            log_int(l, "covered", covered);
            log_end(l);
        }
    }
    cl->covered = covered;
    if (changed)
        cluster_notify(cl, CLUSTER_MAP_CHANGED, NO_NODE);
}

static void on_slots(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    cl_node *n = privdata;
    cluster *cl = n->cl;
    n->outstanding--;
    if (r)
        n->last_progress_ms = uv_now(cl->app->loop);
    cl->refresh_busy = false;
    if (!cl->closed && r)
        apply_slots(cl, n, r);
}

/* --- a node's connection --- */

static void node_schedule_reconnect(cl_node *n)
{
    if (n->cl->closed)
        return;
    n->state = N_DOWN;
    link_retry_schedule(&n->retry, node_on_retry);
}

static void on_handshake(redisAsyncContext *ac, void *r, void *privdata)
{
    cl_node *n = privdata;
    redisReply *reply = r;
    n->outstanding--;
    if (!reply || n->state != N_HANDSHAKE)
        return;
    n->last_progress_ms = uv_now(n->cl->app->loop);
    if (reply->type == REDIS_REPLY_ERROR) {
        buf *l = log_begin(LOG_ERROR, "redis node handshake failed");
        if (l) {
            log_str(l, "node", n->name);
            log_str(l, "detail", reply->str);
            log_end(l);
        }
        redisAsyncDisconnect(ac);
        return;
    }
    if (--n->handshake_left)
        return;
    n->state = N_READY;
    link_retry_reset(&n->retry);
    buf *l = log_begin(LOG_INFO, "redis node ready");
    if (l) {
        log_str(l, "node", n->name);
        log_end(l);
    }
    if (n->cl->refresh_again || n->cl->covered < SLOT_COUNT)
        cluster_refresh(n->cl);
    cluster_notify(n->cl, CLUSTER_NODE_READY, n->idx);
}

/* AUTH with REDIS_USERNAME/REDIS_PASSWORD, and SCRIPT LOAD of every script; no SELECT (a
 * cluster has database 0 only). Ready after the last answer. */
static void node_handshake(cl_node *n)
{
    const config *cfg = &n->cl->app->cfg;
    n->state = N_HANDSHAKE;
    n->handshake_left = 0;
    n->last_progress_ms = uv_now(n->cl->app->loop);
    const char *argv[3];
    size_t lens[3];
    int argc = link_auth_argv(cfg->redis_username, cfg->redis_password, argv, lens);
    if (argc) {
        if (link_send(n->ac, on_handshake, n, argc, argv, lens) == REDIS_OK) {
            n->handshake_left++;
            n->outstanding++;
        }
    }
    for (int s = 0; s < LUA_SCRIPT_COUNT; s++)
        if (link_send_script_load(n->ac, on_handshake, n, s) == REDIS_OK) {
            n->handshake_left++;
            n->outstanding++;
        }
}

static void node_on_connect(const redisAsyncContext *ac, int status)
{
    cl_node *n = ac->data;
    if (status != REDIS_OK) {
        n->ac = NULL; /* hiredis frees the context after this callback */
        node_schedule_reconnect(n);
        return;
    }
    node_handshake(n);
}

static void node_on_disconnect(const redisAsyncContext *ac, int status)
{
    cl_node *n = ac->data;
    bool was_ready = n->state == N_READY;
    n->ac = NULL;
    n->tracked = false;
    n->disconnects++;
    n->cl->stats.disconnects++;
    n->outstanding = 0;
    if (n->cl->closed) {
        n->state = N_CLOSED;
        return;
    }
    if (was_ready) {
        buf *l = log_begin(LOG_WARN, "redis node disconnected");
        if (l) {
            log_str(l, "node", n->name);
            if (status != REDIS_OK)
                log_str(l, "detail", ac->errstr);
            log_end(l);
        }
    }
    node_schedule_reconnect(n);
    cluster_refresh(n->cl);
    cluster_notify(n->cl, CLUSTER_NODE_DOWN, n->idx);
}

static void node_on_resolved(void *data, int status, const char *numeric)
{
    cl_node *n = data;
    if (n->cl->closed)
        return;
    if (status != 0) {
        node_schedule_reconnect(n);
        return;
    }
    n->ac = redis_uv_connect(n->cl->app->loop, numeric, n->port, n, &redis_reply_functions,
                             node_on_connect, node_on_disconnect);
    if (!n->ac)
        node_schedule_reconnect(n);
}

static void node_connect(cl_node *n)
{
    if (n->cl->closed)
        return;
    n->state = N_CONNECTING;
    n->reconnects++;
    n->cl->stats.reconnects++;
    n->resolver_used = true;
    resolve_start(&n->resolver, n->cl->app->loop, n->host, node_on_resolved, n);
}

/* --- what the tracking asks --- */

bool cluster_ready(const cluster *cl)
{
    if (cl->covered != SLOT_COUNT)
        return false;
    bool used[CLUSTER_MAX_NODES] = {false};
    for (int s = 0; s < SLOT_COUNT; s++)
        used[cl->map[s]] = true;
    for (int i = 0; i < cl->nnodes; i++)
        if (used[i] && cl->nodes[i]->state != N_READY)
            return false;
    return true;
}

void cluster_set_listener(cluster *cl, cluster_listener fn, void *ctx)
{
    cl->listener = fn;
    cl->listener_ctx = ctx;
}

int cluster_node_count(const cluster *cl)
{
    return cl->nnodes;
}

bool cluster_node_ready(const cluster *cl, int node)
{
    return cl->nodes[node]->state == N_READY;
}

const char *cluster_node_host(const cluster *cl, int node)
{
    return cl->nodes[node]->host;
}

int cluster_node_port(const cluster *cl, int node)
{
    return cl->nodes[node]->port;
}

bool cluster_owners(const cluster *cl, bool owns[CLUSTER_MAX_NODES])
{
    memset(owns, 0, CLUSTER_MAX_NODES * sizeof *owns);
    for (int s = 0; s < SLOT_COUNT; s++)
        if (cl->map[s] != NO_NODE)
            owns[cl->map[s]] = true;
    return cl->covered == SLOT_COUNT;
}

void cluster_node_set_tracked(cluster *cl, int node, bool tracked)
{
    cl->nodes[node]->tracked = tracked && cl->nodes[node]->state == N_READY;
}

void cluster_render_metrics(buf *out, void *ctx)
{
    const cluster *cl = ctx;
    metrics_gauge(out, "entityd_redis_cluster_slots_covered",
                  "Hash slots the cluster slot map assigns to a primary (ready at 16384).",
                  cl->covered);
    metrics_counter(out, "entityd_redis_cluster_refreshes_total",
                    "Slot map refreshes asked of the cluster (CLUSTER SLOTS).", cl->refreshes);
    metrics_family(out, "entityd_redis_node_up", "gauge",
                   "1 when the connection to this cluster node is ready.");
    for (int i = 0; i < cl->nnodes; i++)
        buf_printf(out, "entityd_redis_node_up{node=\"%s\"} %d\n", cl->nodes[i]->name,
                   cl->nodes[i]->state == N_READY);
    metrics_family(out, "entityd_redis_node_redirects_total", "counter",
                   "MOVED and ASK answers from this cluster node, followed.");
    for (int i = 0; i < cl->nnodes; i++)
        buf_printf(out, "entityd_redis_node_redirects_total{node=\"%s\"} %llu\n",
                   cl->nodes[i]->name, (unsigned long long)cl->nodes[i]->redirects);
    metrics_family(out, "entityd_redis_node_connects_total", "counter",
                   "Connection attempts to this cluster node.");
    for (int i = 0; i < cl->nnodes; i++)
        buf_printf(out, "entityd_redis_node_connects_total{node=\"%s\"} %llu\n", cl->nodes[i]->name,
                   (unsigned long long)cl->nodes[i]->reconnects);
    metrics_family(out, "entityd_redis_node_scripts_stopped_total", "counter",
                   "Scripts this cluster node stopped midway, a slot moving (should stay 0: "
                   "their outcome is unknown).");
    for (int i = 0; i < cl->nnodes; i++)
        buf_printf(out, "entityd_redis_node_scripts_stopped_total{node=\"%s\"} %llu\n",
                   cl->nodes[i]->name, (unsigned long long)cl->nodes[i]->scripts_stopped);
}
