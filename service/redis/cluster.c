/* cluster: the store's units over a Redis Cluster: routing by slot, redirects, retries.
 *
 * Ownership: a unit is an op holding a private copy of its commands (a redirect resends them).
 * hiredis holds the op through `holds` callbacks (the unit's last reply, and in a transaction
 * each queued command's reply, which may carry the redirect EXEC's EXECABORT hides); the op is
 * freed once it is answered and no callback holds it. Unanswered ops sit in the deadline list,
 * oldest first (a resend keeps its place: the deadline is the first one); an op waiting for a
 * retry is in that list with `retry_at` set and no hold.
 *
 * Nodes and the slot map are cluster_node.c's. */
#include "redis/cluster.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/buf.h"
#include "core/log.h"
#include "core/metrics.h"
#include "cache/readcache.h"
#include "redis/cluster_int.h"
#include "redis/link.h"
#include "redis/lua_scripts.h"
#include "redis/redis_uv.h"
#include "redis/reply.h"
#include "redis/resolve.h"
#include "redis/send.h"
#include "redis/slot.h"

static void dispatch(cl_op *op);

/* The keys a unit names, as the read cache's tickets take them (store.c's ticket_keys):
 * argv[1], or a script's declared keys. Voids every kept answer that read one, and every read
 * of one in flight: after a write of ours (written: but the keys its script never writes,
 * lua_script.read_only_keys), or for a read that cannot be tracked. */
static void forget_keys(const cl_op *op, bool written)
{
    unsigned keep = written && op->kind == CLUSTER_SCRIPT && op->script >= 0
                        ? lua_scripts[op->script].read_only_keys
                        : 0;
    readcache *rc = op->cl->app->reads;
    if (!readcache_enabled(rc))
        return;
    for (int i = 0; i < op->ncmds; i++) {
        const store_cmd *c = &op->cmds_copy[i];
        int first, n = link_cmd_keys(c, &first);
        for (int k = 0; k < n; k++)
            if (k >= 32 || !(keep >> k & 1))
                readcache_invalidate(rc, c->argv[first + k], c->lens[first + k]);
    }
}

/* Answers an op once; it is freed when nothing holds it any more. */
static void unit_answer(cl_op *op, int status, redisReply *reply)
{
    cluster *cl = op->cl;
    store_cb cb = op->cb;
    op->cb = NULL;
    link_list_unlink(&cl->ops, &op->le);
    if (op->retry_at) {
        op->retry_at = 0;
        cl->parked--;
    }
    if (status == STORE_TIMEOUT)
        cl->stats.timeouts++;
    if (reply && reply->type == REDIS_REPLY_ERROR)
        cl->stats.errors++;
    void *data = op->data;
    if (!op->holds)
        free(op);
    cb(data, status, reply);
}

/* --- sending --- */

static void release(cl_op *op, cl_node *n)
{
    if (--op->holds)
        return;
    n->outstanding--;
    op->cl->pending -= (size_t)op->cmds;
    op->cmds = 0;
}

/* Waits before the op is sent again; false when it has waited often enough already. */
/* Schedules a retry. A slot being moved (TRYAGAIN, or a write script's ASK) is retried until the
 * unit's deadline, since a move of a slot holding large keys takes longer than the usual tries;
 * anything else MAX_TRIES times. False when no retry is left: the caller answers 503 now rather
 * than 504 at the deadline. */
static bool park(cl_op *op, bool slot_moving)
{
    cluster *cl = op->cl;
    if (op->tries >= (slot_moving ? MAX_MOVING_TRIES : MAX_TRIES))
        return false;
    unsigned wait = op->tries < 8 ? RETRY_BASE_MS << op->tries : RETRY_MAX_MS;
    uint64_t at = uv_now(cl->app->loop) + (wait < RETRY_MAX_MS ? wait : RETRY_MAX_MS);
    if (slot_moving && at >= op->le.deadline_ms)
        return false;
    op->tries++;
    op->retry_at = at;
    cl->parked++;
    return true;
}

/* A script that writes several keys of an entity is never sent behind ASKING: an ASK means its
 * declared keys have left this node, but keys it finds by name may not have, and a write on the
 * importing node would create them anew there (the move would then fail, or overwrite them). It
 * waits for the move to end instead; single-key scripts and reads follow the ASK. */
static bool ask_must_wait(const cl_op *op)
{
    return op->kind == CLUSTER_SCRIPT && op->nkeys > 1;
}

/* Redis 7.0's answer when a running script met a key of a moving slot missing on this node. The
 * script stopped where it was, without undoing its writes; the entity scripts' moving_guard
 * (lua/_prelude.lua) keeps this from happening, and should it happen anyway the outcome is
 * unknown, like a lost connection's. */
static bool script_stopped_midway(const redisReply *r)
{
    static const char text[] = "ERR Script attempted to access a non local key";
    return r->len >= sizeof text - 1 && !memcmp(r->str, text, sizeof text - 1);
}

static bool slot_error(const redisReply *r, cl_op *op)
{
    if (!r || r->type != REDIS_REPLY_ERROR)
        return false;
    int kind =
        slot_parse_error(r->str, r->len, &op->r_slot, op->r_host, sizeof op->r_host, &op->r_port);
    if (kind == SLOT_ERR_OTHER)
        return false;
    op->redirect = kind;
    return true;
}

/* A queued command's answer: +QUEUED, or the redirect that makes EXEC answer EXECABORT. */
static void on_queued(redisAsyncContext *ac, void *r, void *privdata)
{
    cl_op *op = privdata;
    if (r && !op->redirect)
        slot_error(r, op);
    release(op, ac->data);
    if (!op->holds && !op->cb)
        free(op);
}

/* Follows a redirect or retries; false when the op must be answered as it is. */
static bool follow(cl_op *op, cl_node *from)
{
    cluster *cl = op->cl;
    switch (op->redirect) {
    case SLOT_ERR_MOVED:
    case SLOT_ERR_ASK: {
        from->redirects++;
        cl->redirects++;
        if (++op->hops > CLUSTER_MAX_HOPS)
            return false;
        cl_node *to = cluster_node_get(cl, op->r_host, op->r_port);
        if (!to)
            return false;
        if (op->redirect == SLOT_ERR_ASK && ask_must_wait(op)) {
            if (!park(op, true))
                return false;
            op->redirect = 0;
            return true;
        }
        if (op->redirect == SLOT_ERR_MOVED) {
            int was = cl->map[op->r_slot];
            if (was == NO_NODE)
                cl->covered++;
            cl->map[op->r_slot] = (int16_t)to->idx;
            op->ask_node = NO_NODE;
            if (was != to->idx)
                cluster_notify(cl, CLUSTER_MAP_CHANGED, to->idx);
            cluster_refresh(cl);
        } else {
            op->ask_node = to->idx;
        }
        op->redirect = 0;
        dispatch(op);
        return true;
    }
    case SLOT_ERR_TRYAGAIN:
    case SLOT_ERR_DOWN:
        if (op->redirect == SLOT_ERR_DOWN) {
            op->ask_node = NO_NODE;
            cluster_refresh(cl);
        }
        if (!park(op, op->redirect == SLOT_ERR_TRYAGAIN))
            return false;
        op->redirect = 0;
        return true;
    }
    return false;
}

static void on_unit_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    cl_op *op = privdata;
    cl_node *n = ac->data;
    cluster *cl = op->cl;
    redisReply *reply = r;
    release(op, n);
    if (reply)
        n->last_progress_ms = uv_now(cl->app->loop);
    if (reply && (op->flags & SEND_WRITES))
        forget_keys(op, true); /* the write's own caller never reads what it replaced */
    if (!op->cb) {
        if (!op->holds)
            free(op);
        return;
    }
    if (!reply) {
        /* The link went with the unit on it: whether Redis ran it is unknown. */
        cluster_refresh(cl);
        unit_answer(op, STORE_UNAVAILABLE, NULL);
        return;
    }
    if (!cl->closed && reply->type == REDIS_REPLY_ERROR) {
        if ((op->redirect || slot_error(reply, op)) && follow(op, n))
            return;
        if (op->kind == CLUSTER_SCRIPT && !strncmp(reply->str, "NOSCRIPT", 8) &&
            ++op->hops <= CLUSTER_MAX_HOPS) {
            /* This node lost its script cache (restart, flush, a replica just promoted). */
            op->reload = true;
            dispatch(op);
            return;
        }
        if (op->redirect) {
            /* A redirect or retry past its bound: 503. */
            unit_answer(op, STORE_UNAVAILABLE, NULL);
            return;
        }
        if (op->kind == CLUSTER_SCRIPT && script_stopped_midway(reply)) {
            n->scripts_stopped++;
            cluster_refresh(cl);
            unit_answer(op, STORE_UNAVAILABLE, NULL);
            return;
        }
    }
    if (op->kind == CLUSTER_EXEC && n->ac && link_exec_lost_script(reply))
        link_reload_scripts(n->ac);
    unit_answer(op, STORE_OK, reply);
}

static int any_ready(const cluster *cl)
{
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->state == N_READY)
            return i;
    return NO_NODE;
}

/* Sends the op to the node it belongs to now, or parks it while that node is not connected. */
static void dispatch(cl_op *op)
{
    cluster *cl = op->cl;
    int ni = op->fixed_node != NO_NODE ? op->fixed_node
             : op->ask_node != NO_NODE ? op->ask_node
             : op->slot >= 0           ? cl->map[op->slot]
                                       : any_ready(cl);
    cl_node *n = ni != NO_NODE ? cl->nodes[ni] : NULL;
    if (op->fixed_node != NO_NODE && n->state != N_READY) {
        unit_answer(op, STORE_UNAVAILABLE, NULL);
        return;
    }
    if (!n || n->state != N_READY) {
        if (!n)
            cluster_refresh(cl);
        if (!park(op, false))
            unit_answer(op, STORE_UNAVAILABLE, NULL);
        return;
    }
    redisAsyncContext *ac = n->ac;
    static const char *asking[] = {"ASKING"};
    static const size_t asking_len[] = {6};
    int cmds = 0, held = 0, rc = REDIS_OK;
    if (op->ask_node != NO_NODE && (rc = link_send(ac, NULL, NULL, 1, asking, asking_len)) == 0)
        cmds++;
    /* After NOSCRIPT: every script, not only this one, so that the transactions that run one
     * on this node (and cannot be resent with a source) find theirs too. */
    for (int s = 0; rc == REDIS_OK && op->reload && s < LUA_SCRIPT_COUNT; s++)
        if ((rc = link_send_script_load(ac, NULL, NULL, s)) == 0)
            cmds++;
    op->reload = false;
    op->redirect = 0;
    if (!n->outstanding)
        n->last_progress_ms = uv_now(cl->app->loop);
    if (op->flags & SEND_TRACK) {
        /* Behind ASKING the slot is moving and the answer comes from a node that may not own
         * it; and a node whose tracking is not confirmed would never say the keys changed. */
        static const char *caching[] = {"CLIENT", "CACHING", "yes"};
        static const size_t caching_len[] = {6, 7, 3};
        if (op->ask_node != NO_NODE || !n->tracked) {
            op->flags &= ~SEND_TRACK;
            forget_keys(op, false);
        } else if (rc == REDIS_OK &&
                   (rc = link_send(ac, NULL, NULL, 3, caching, caching_len)) == 0) {
            cmds++;
        }
    }
    if (op->kind == CLUSTER_EXEC) {
        static const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
        static const size_t multi_len[] = {5}, exec_len[] = {4};
        if (rc == REDIS_OK && (rc = link_send(ac, NULL, NULL, 1, multi, multi_len)) == 0)
            cmds++;
        for (int i = 0; rc == REDIS_OK && i < op->ncmds; i++) {
            const store_cmd *c = &op->cmds_copy[i];
            if ((rc = link_send(ac, on_queued, op, c->argc, c->argv, c->lens)) == 0) {
                cmds++;
                held++;
            }
        }
        if (rc == REDIS_OK && (rc = link_send(ac, on_unit_reply, op, 1, exec, exec_len)) == 0) {
            cmds++;
            held++;
        }
    } else if (rc == REDIS_OK) {
        const store_cmd *c = &op->cmds_copy[0];
        if ((rc = link_send(ac, on_unit_reply, op, c->argc, c->argv, c->lens)) == 0) {
            cmds++;
            held++;
        }
    }
    cl->stats.commands += (uint64_t)cmds;
    if (held) {
        op->holds += held;
        op->node = ni;
        op->cmds = cmds;
        cl->pending += (size_t)cmds;
        n->outstanding++;
    }
    if (rc != REDIS_OK)
        unit_answer(op, STORE_UNAVAILABLE, NULL); /* freed by its last hold, if any */
}

/* The slot of a unit's keys, or -1 when they span slots (a bug of the caller). */
static int unit_slot(int kind, int nkeys, int ncmds, const store_cmd *cmds)
{
    if (kind == CLUSTER_SCRIPT) {
        if (nkeys < 1)
            return -2; /* no key: any node */
        int s = slot_of(cmds[0].argv[0], cmds[0].lens[0]);
        for (int i = 1; i < nkeys && i < cmds[0].argc; i++)
            if (slot_of(cmds[0].argv[i], cmds[0].lens[i]) != s)
                return -1;
        return s;
    }
    int s = -2;
    for (int i = 0; i < ncmds; i++) {
        /* A command's first key: argv[1], or a script's first declared key. */
        int k;
        if (link_cmd_keys(&cmds[i], &k) < 1)
            continue;
        int ks = slot_of(cmds[i].argv[k], cmds[i].lens[k]);
        if (s == -2)
            s = ks;
        else if (ks != s)
            return -1;
    }
    return s;
}

/* One allocation: the op, the commands, then each command's argv, lens and bytes. A script's
 * command is stored as EVALSHA <sha> <nkeys> followed by the caller's words. */
static cl_op *unit_new(cluster *cl, store_cb cb, void *data, int kind, int script, int nkeys,
                       int ncmds, const store_cmd *cmds)
{
    int pre = kind == CLUSTER_SCRIPT ? 3 : 0;
    size_t size = sizeof(cl_op) + (size_t)ncmds * sizeof(store_cmd) + 32;
    for (int i = 0; i < ncmds; i++) {
        size += (size_t)(cmds[i].argc + pre) * (sizeof(char *) + sizeof(size_t));
        for (int j = 0; j < cmds[i].argc; j++)
            size += cmds[i].lens[j];
    }
    cl_op *op = calloc(1, size);
    if (!op)
        return NULL;
    op->cl = cl;
    op->cb = cb;
    op->data = data;
    op->kind = kind;
    op->script = script;
    op->nkeys = nkeys;
    op->node = op->ask_node = op->fixed_node = NO_NODE;
    op->ncmds = ncmds;
    op->cmds_copy = (store_cmd *)(op + 1);
    /* Every command's argv and lens arrays first, so each stays aligned; the bytes after. */
    char *arrays = (char *)(op->cmds_copy + ncmds);
    char *p = arrays;
    for (int i = 0; i < ncmds; i++)
        p += (size_t)(cmds[i].argc + pre) * (sizeof(char *) + sizeof(size_t));
    for (int i = 0; i < ncmds; i++) {
        int argc = cmds[i].argc + pre;
        const char **argv = (const char **)arrays;
        size_t *lens = (size_t *)(argv + argc);
        arrays = (char *)(lens + argc);
        if (pre) {
            char *nk = p;
            p += snprintf(nk, 16, "%d", nkeys) + 1;
            argv[0] = "EVALSHA";
            lens[0] = 7;
            argv[1] = lua_scripts[script].sha1;
            lens[1] = 40;
            argv[2] = nk;
            lens[2] = strlen(nk);
        }
        for (int j = 0; j < cmds[i].argc; j++) {
            memcpy(p, cmds[i].argv[j], cmds[i].lens[j]);
            argv[pre + j] = p;
            lens[pre + j] = cmds[i].lens[j];
            p += cmds[i].lens[j];
        }
        op->cmds_copy[i] = (store_cmd){argc, argv, lens};
    }
    return op;
}

bool cluster_send(cluster *cl, int flags, store_cb cb, void *data, int kind, int script, int nkeys,
                  int ncmds, const store_cmd *cmds)
{
    size_t n = kind == CLUSTER_EXEC ? (size_t)ncmds + 2 : 1;
    if (cl->closed || ncmds < 1 || cmds[0].argc < 1 ||
        send_refused(cl->pending, (size_t)cl->app->cfg.redis_max_pending, flags, n)) {
        if (!cl->closed && ncmds >= 1)
            cl->stats.shed++;
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    int slot = unit_slot(kind, nkeys, ncmds, cmds);
    if (slot == -1) {
        log_event(LOG_ERROR, "redis cluster: a unit's keys span slots; refused", NULL);
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    cl_op *op = unit_new(cl, cb, data, kind, script, nkeys, ncmds, cmds);
    if (!op) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    op->slot = slot;
    op->flags = flags;
    op->le.deadline_ms = uv_now(cl->app->loop) + (uint64_t)cl->app->cfg.redis_timeout_ms;
    link_list_push(&cl->ops, &op->le);
    /* Held across the dispatch, which may answer it, to tell the caller whether cb ran. */
    op->holds++;
    dispatch(op);
    bool answered = op->cb == NULL;
    if (!--op->holds && answered)
        free(op);
    return answered;
}

/* --- the tick: deadlines, retries, refreshes, silent links --- */

static void cluster_tick(uv_timer_t *t)
{
    cluster *cl = t->data;
    uint64_t now = uv_now(cl->app->loop);
    for (link_entry *e; (e = link_list_expired(&cl->ops, now));)
        unit_answer((cl_op *)e, STORE_TIMEOUT, NULL);
    if (cl->parked) {
        cl_op *due = NULL;
        for (cl_op *op = (cl_op *)cl->ops.head; op; op = (cl_op *)op->le.next)
            if (op->retry_at && op->retry_at <= now) {
                op->retry_at = 0;
                cl->parked--;
                op->due = due;
                due = op;
            }
        while (due) {
            cl_op *op = due;
            due = op->due;
            if (op->cb)
                dispatch(op);
        }
    }
    if (cl->refresh_busy && now - cl->refresh_started_ms > REFRESH_LIMIT_MS)
        cl->refresh_busy = false;
    /* cluster_ready walks the map: only asked once a periodic refresh would be due. */
    if ((cl->refresh_again && now - cl->refresh_last_ms >= REFRESH_MIN_MS) ||
        (now - cl->refresh_last_ms >= REFRESH_IDLE_MS && (cl->listener || !cluster_ready(cl))))
        cluster_refresh(cl);
    for (int i = 0; i < cl->nnodes; i++) {
        cl_node *n = cl->nodes[i];
        if (n->ac && link_stalled(cl->app, n->outstanding, n->last_progress_ms, now)) {
            /* Freed, not disconnected: a silent node would never let a disconnect finish. */
            buf *l = log_begin(LOG_WARN, "redis node stalled: reconnecting");
            if (l) {
                log_str(l, "node", n->name);
                log_end(l);
            }
            n->last_progress_ms = now;
            redisAsyncContext *ac = n->ac;
            n->ac = NULL;
            n->state = N_DOWN;
            redisAsyncFree(ac); /* node_on_disconnect schedules the reconnect */
        }
    }
}

/* --- life --- */

void cluster_node_control(cluster *cl, int node, store_cb cb, void *data, int argc,
                          const char **argv, const size_t *lens)
{
    store_cmd one = {argc, argv, lens};
    if (cl->closed || node < 0 || node >= cl->nnodes || cl->nodes[node]->state != N_READY ||
        send_refused(cl->pending, (size_t)cl->app->cfg.redis_max_pending, SEND_CONTROL, 1)) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return;
    }
    cl_op *op = unit_new(cl, cb, data, CLUSTER_COMMAND, -1, 0, 1, &one);
    if (!op) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return;
    }
    op->slot = -2;
    op->fixed_node = node;
    op->flags = SEND_CONTROL;
    op->le.deadline_ms = uv_now(cl->app->loop) + (uint64_t)cl->app->cfg.redis_timeout_ms;
    link_list_push(&cl->ops, &op->le);
    op->holds++;
    dispatch(op);
    if (!--op->holds && !op->cb)
        free(op);
}

size_t cluster_pending(const cluster *cl)
{
    return cl->pending;
}

const store_stats *cluster_stats(const cluster *cl)
{
    return &cl->stats;
}

int cluster_new(cluster **out, app *a, char *err, size_t err_len)
{
    static resolve_endpoint seeds[CLUSTER_MAX_NODES];
    int count = resolve_parse_list(a->cfg.redis_cluster_nodes, seeds, CLUSTER_MAX_NODES);
    for (int i = 0; i < count; i++)
        if (strlen(seeds[i].host) >= HOST_SIZE)
            count = -1;
    if (count == -2) {
        snprintf(err, err_len, "REDIS_CLUSTER_NODES lists more than %d nodes", CLUSTER_MAX_NODES);
        return -1;
    }
    if (count < 0) {
        snprintf(err, err_len, "REDIS_CLUSTER_NODES must be host:port[,host:port...]");
        return -1;
    }
    cluster *cl = calloc(1, sizeof *cl);
    if (!cl) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    cl->app = a;
    for (int s = 0; s < SLOT_COUNT; s++)
        cl->map[s] = NO_NODE;
    uv_timer_init(a->loop, &cl->tick);
    cl->tick.data = cl;
    uv_timer_start(&cl->tick, cluster_tick, LINK_TICK_MS, LINK_TICK_MS);
    /* A node the table has no room for is only a seed fewer: the others still find the map. */
    for (int i = 0; i < count; i++)
        cluster_node_get(cl, seeds[i].host, seeds[i].port);
    metrics_register(cluster_render_metrics, cl);
    *out = cl;
    return 0;
}

void cluster_close(cluster *cl)
{
    if (cl->closed)
        return;
    cl->closed = true;
    for (int i = 0; i < cl->nnodes; i++) {
        cl_node *n = cl->nodes[i];
        if (n->resolver_used)
            resolve_cancel(&n->resolver);
        if (n->ac) {
            redisAsyncContext *ac = n->ac;
            n->ac = NULL;
            redisAsyncFree(ac); /* answers the ops it holds, STORE_UNAVAILABLE */
        }
        n->state = N_CLOSED;
        uv_close((uv_handle_t *)&n->retry.timer, NULL);
    }
    while (cl->ops.head)
        unit_answer((cl_op *)cl->ops.head, STORE_UNAVAILABLE, NULL);
    uv_close((uv_handle_t *)&cl->tick, NULL);
}

static bool transport_send(void *ctx, int flags, store_cb cb, void *data, int kind, int script,
                           int nkeys, int ncmds, const store_cmd *cmds)
{
    return cluster_send(ctx, flags, cb, data, kind, script, nkeys, ncmds, cmds);
}

static bool transport_ready(const void *ctx)
{
    return cluster_ready(ctx);
}

static size_t transport_pending(const void *ctx)
{
    return cluster_pending(ctx);
}

static const store_stats *transport_stats(const void *ctx)
{
    return cluster_stats(ctx);
}

static void transport_close(void *ctx)
{
    cluster_close(ctx);
}

static void transport_free(void *ctx)
{
    cluster_free(ctx);
}

/* --- the node view (transport.h): the cluster's own numbering --- */

static int transport_node_count(const void *ctx)
{
    return cluster_node_count(ctx);
}

static bool transport_node_owners(const void *ctx, bool *owns)
{
    return cluster_owners(ctx, owns);
}

static bool transport_node_ready(const void *ctx, int node)
{
    return cluster_node_ready(ctx, node);
}

static transport_at transport_node_at(const void *ctx, int node)
{
    const cluster *cl = ctx;
    const config *cfg = &cl->app->cfg;
    return (transport_at){
        cluster_node_host(cl, node), cfg->redis_username ? cfg->redis_username : "",
        cfg->redis_password ? cfg->redis_password : "", cluster_node_port(cl, node)};
}

static void transport_node_control(void *ctx, int node, store_cb cb, void *data, int argc,
                                   const char **argv, const size_t *lens)
{
    cluster_node_control(ctx, node, cb, data, argc, argv, lens);
}

static void transport_node_set_tracked(void *ctx, int node, bool tracked)
{
    cluster_node_set_tracked(ctx, node, tracked);
}

static void transport_node_listen(void *ctx, transport_listener fn, void *fn_ctx)
{
    cluster_set_listener(ctx, fn, fn_ctx);
}

/* Connected means ready here: a cluster is of use only once every slot has its node. */
const store_transport cluster_transport = {transport_send,
                                           transport_ready,
                                           transport_ready,
                                           transport_pending,
                                           transport_stats,
                                           transport_close,
                                           transport_free,
                                           transport_node_count,
                                           transport_node_owners,
                                           transport_node_ready,
                                           transport_node_at,
                                           transport_node_control,
                                           transport_node_set_tracked,
                                           transport_node_listen};

void cluster_free(cluster *cl)
{
    if (!cl)
        return;
    for (int i = 0; i < cl->nnodes; i++)
        free(cl->nodes[i]);
    free(cl);
}
