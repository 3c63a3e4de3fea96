/* store: the one pipelined Redis connection: deadlines, reconnects, Lua scripts by SHA. Reads
 * through the read cache are store_read.c's; framing, keys and backoff link.c's.
 *
 * Every command is an op: hiredis owns the op as privdata until its callback runs (with a reply,
 * or NULL when the connection goes), and always runs it exactly once. The deadline list holds
 * ops not yet answered, oldest first; the tick answers expired ones with STORE_TIMEOUT and
 * leaves them to hiredis, whose late callback then only frees them.
 *
 * Load shedding: `pending` counts the commands handed to hiredis whose answer has not come
 * (MULTI, the queued commands, EXEC and CLIENT CACHING included: each one holds its bytes in
 * hiredis's output buffer or the socket, and a slot in its callback list, until Redis answers).
 * An op answered STORE_TIMEOUT still counts: its memory stays until Redis answers or the
 * connection goes. Past REDIS_MAX_PENDING a new unit is refused with STORE_UNAVAILABLE before
 * anything is sent, so memory toward a slow or paused Redis stays bounded. */
#include "redis/store.h"
#include "redis/store_int.h"
#include "redis/transport.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/buf.h"
#include "core/log.h"
#include "core/metrics.h"
#include "redis/cluster.h"
#include "redis/link.h"
#include "redis/lua_scripts.h"
#include "cache/readcache.h"
#include "redis/reply.h"
#include "redis/redis_uv.h"
#include "redis/resolve.h"
#include "redis/send.h"
#include "redis/sentinel.h"

typedef struct store_op {
    link_entry le; /* in the deadline list while unanswered; first, so a cast finds the op */
    store *st;
    store_cb cb; /* NULL once answered */
    void *data;
    int script; /* -1, or the script to resend with EVAL on NOSCRIPT */
    int nkeys;  /* a script's keys, argv[3..]: invalidated in the read cache on its answer */
    int cmds;   /* commands this op accounts for in the store's `pending` until its answer */
    int argc;
    char **argv; /* for script ops: a private copy, in the same allocation as the op */
    size_t *lens;
    size_t extra; /* bytes allocated past the op (0: a plain op, recycled) */
} store_op;

/* Plain ops are recycled: one malloc/free pair per command otherwise. Loop thread only. */
#define OP_CACHE_MAX 256
static store_op *op_cache;
static int op_cached;

static void op_free(store_op *op)
{
    if (op->extra == 0 && op_cached < OP_CACHE_MAX) {
        op->le.next = (link_entry *)op_cache; /* le is first: NULL stays NULL */
        op_cache = op;
        op_cached++;
        return;
    }
    free(op);
}

/* In OPTIN tracking, the command right after this one is tracked (for MULTI: the whole
 * transaction). No callback: its +OK says nothing. */
static int send_caching_yes(redisAsyncContext *ac)
{
    static const char caching[] = "*3\r\n$6\r\nCLIENT\r\n$7\r\nCACHING\r\n$3\r\nyes\r\n";
    return redisAsyncFormattedCommand(ac, NULL, NULL, caching, sizeof caching - 1);
}

static void start_connect(store *st);

/* Answers an op once; hiredis may still hold it. */
static void op_answer(store_op *op, int status, redisReply *reply)
{
    store_cb cb = op->cb;
    op->cb = NULL;
    link_list_unlink(&op->st->ops, &op->le);
    if (status == STORE_TIMEOUT)
        op->st->stats.timeouts++;
    if (reply && reply->type == REDIS_REPLY_ERROR)
        op->st->stats.errors++;
    cb(op->data, status, reply);
}

static void on_tick(uv_timer_t *t)
{
    store *st = t->data;
    uint64_t now = uv_now(st->app->loop);
    for (link_entry *e; (e = link_list_expired(&st->ops, now));)
        op_answer((store_op *)e, STORE_TIMEOUT, NULL);
    if (st->ac && link_stalled(st->app, st->outstanding, st->last_progress_ms, now)) {
        /* Free, not disconnect: hiredis's disconnect waits for every pending reply, and a
         * silent server sends none. Freeing answers them all (NULL) and the reconnect begins. */
        log_event(LOG_WARN, "redis stalled: reconnecting", NULL);
        st->last_progress_ms = now;
        redisAsyncContext *ac = st->ac;
        st->ac = NULL;
        st->state = ST_DOWN;
        redisAsyncFree(ac); /* on_disconnect schedules the reconnect */
    }
    if (!st->ops.head && !st->outstanding)
        uv_timer_stop(&st->tick);
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    store_op *op = privdata;
    store *st = op->st;
    redisReply *reply = r;
    st->outstanding--;
    /* Replies come in order: EXEC's answer means MULTI's and the QUEUED ones came before. */
    st->pending -= (size_t)op->cmds;
    op->cmds = 0;
    if (reply)
        st->last_progress_ms = uv_now(st->app->loop);
    if (reply && op->nkeys > 0 && readcache_enabled(st->app->reads))
        for (int i = 0; i < op->nkeys; i++)
            readcache_invalidate(st->app->reads, op->argv[3 + i], op->lens[3 + i]);
    if (op->cb) {
        if (reply && op->script >= 0 && reply->type == REDIS_REPLY_ERROR &&
            !strncmp(reply->str, "NOSCRIPT", 8) && ac == st->ac && st->state == ST_READY) {
            /* Redis lost its script cache (restart, flush, failover): send the source, and
             * load every script again for the transactions that run one (and cannot). */
            link_reload_scripts(ac);
            const char **argv = (const char **)op->argv;
            argv[0] = "EVAL";
            argv[1] = lua_scripts[op->script].source;
            op->lens[0] = 4;
            op->lens[1] = strlen(lua_scripts[op->script].source);
            int s = op->script;
            op->script = -1;
            if (redisAsyncCommandArgv(ac, on_reply, op, op->argc, argv, op->lens) == REDIS_OK) {
                st->outstanding++;
                st->pending++;
                op->cmds = 1;
                return;
            }
            op->script = s;
        }
        op_answer(op, reply ? STORE_OK : STORE_UNAVAILABLE, reply);
    }
    op_free(op);
}

static store_op *op_new(store *st, store_cb cb, void *data, size_t extra)
{
    store_op *op;
    if (extra == 0 && op_cache) {
        op = op_cache;
        op_cache = (store_op *)op->le.next;
        op_cached--;
    } else if (!(op = malloc(sizeof *op + extra))) {
        return NULL;
    }
    memset(op, 0, sizeof *op);
    op->extra = extra;
    op->st = st;
    op->cb = cb;
    op->data = data;
    op->script = -1;
    op->le.deadline_ms = uv_now(st->app->loop) + (uint64_t)st->app->cfg.redis_timeout_ms;
    return op;
}

/* Sends the op's command, the last of `cmds` commands of its unit (the others already queued
 * without a callback). Returns true when the op was answered (and freed) already. */
static bool submit(store *st, store_op *op, int cmds, int argc, const char **argv,
                   const size_t *lens)
{
    if (link_send(st->ac, on_reply, op, argc, argv, lens) != REDIS_OK) {
        store_cb cb = op->cb;
        void *data = op->data;
        op_free(op);
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    st->stats.commands++;
    if (st->outstanding++ == 0)
        st->last_progress_ms = uv_now(st->app->loop);
    op->cmds = cmds;
    st->pending += (size_t)cmds;
    link_list_push(&st->ops, &op->le);
    if (!uv_is_active((uv_handle_t *)&st->tick))
        uv_timer_start(&st->tick, on_tick, LINK_TICK_MS, LINK_TICK_MS);
    return false;
}

/* True when a unit of n commands must be refused for REDIS_MAX_PENDING (send.h). */
static bool shed(store *st, int flags, size_t n)
{
    if (!send_refused(st->pending, (size_t)st->app->cfg.redis_max_pending, flags, n))
        return false;
    st->stats.shed++;
    return true;
}

/* The single connection's unit of one command. */
static bool single_command(store *st, int flags, store_cb cb, void *data, int argc,
                           const char **argv, const size_t *lens)
{
    bool track = flags & SEND_TRACK;
    if (st->state != ST_READY || shed(st, flags, track ? 2 : 1)) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    store_op *op = op_new(st, cb, data, 0);
    if (!op) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    int cmds = 1;
    if (track && send_caching_yes(st->ac) == REDIS_OK) {
        st->stats.commands++;
        cmds++;
    }
    return submit(st, op, cmds, argc, argv, lens);
}

static void on_exec_reply(void *data, int status, redisReply *reply)
{
    store_op *inner = data; /* carries the caller's callback */
    store *st = inner->st;
    if (status == STORE_OK && st->ac && link_exec_lost_script(reply))
        link_reload_scripts(st->ac);
    store_cb cb = inner->cb;
    void *cb_data = inner->data;
    op_free(inner);
    cb(cb_data, status, reply);
}

/* The single connection's transaction. */
static bool single_exec(store *st, int flags, store_cb cb, void *data, int ncmds,
                        const store_cmd *cmds)
{
    bool track = flags & SEND_TRACK;
    /* MULTI, the commands, EXEC, and CLIENT CACHING when tracked. */
    int total = ncmds + 2 + (track ? 1 : 0);
    if (st->state != ST_READY || shed(st, flags, (size_t)total)) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    /* The caller's callback rides in a spare op so that EXEC's answer is looked at first. */
    store_op *inner = op_new(st, cb, data, 0);
    store_op *op = inner ? op_new(st, on_exec_reply, inner, 0) : NULL;
    if (!op) {
        if (inner)
            op_free(inner);
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    /* MULTI and the QUEUED answers carry no callback: EXEC's reply says it all, and a dropped
     * connection answers EXEC's op with NULL like any other. */
    static const char *multi[] = {"MULTI"};
    static const size_t multi_len[] = {5};
    int rc = track ? send_caching_yes(st->ac) : REDIS_OK;
    if (rc == REDIS_OK)
        rc = link_send(st->ac, NULL, NULL, 1, multi, multi_len);
    for (int i = 0; rc == REDIS_OK && i < ncmds; i++)
        rc = link_send(st->ac, NULL, NULL, cmds[i].argc, cmds[i].argv, cmds[i].lens);
    if (rc != REDIS_OK) {
        op_free(op);
        op_free(inner);
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    st->stats.commands += (uint64_t)total - 1;
    static const char *exec_cmd[] = {"EXEC"};
    static const size_t exec_len[] = {4};
    return submit(st, op, total, 1, exec_cmd, exec_len);
}

bool store_link_ready(const store *st)
{
    return st->state == ST_READY;
}

struct app *store_app(const store *st)
{
    return st->app;
}

store_endpoint store_get_endpoint(const store *st)
{
    return (store_endpoint){st->at.host, st->at.user, st->at.password, st->at.port};
}

/* The single connection's script: EVALSHA, resent with the source on NOSCRIPT. */
static bool single_script(store *st, int send, int script, store_cb cb, void *data, int nkeys,
                          int argc, const char **argv, const size_t *lens)
{
    bool writes = send & SEND_WRITES;
    if (st->state != ST_READY || shed(st, send, 1)) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    /* One allocation: the op, then argv pointers, lengths and the bytes, kept for a resend. */
    int total = argc + 3;
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += lens[i];
    size_t extra = (size_t)total * (sizeof(char *) + sizeof(size_t)) + bytes + BUF_INT_SIZE;
    store_op *op = op_new(st, cb, data, extra);
    if (!op) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    op->argv = (char **)(op + 1);
    op->lens = (size_t *)(op->argv + total);
    char *p = (char *)(op->lens + total);
    char *nk = p;
    p += buf_format_int(nk, nkeys) + 1;
    op->argv[0] = "EVALSHA";
    op->lens[0] = 7;
    op->argv[1] = st->shas[script];
    op->lens[1] = 40;
    op->argv[2] = nk;
    op->lens[2] = strlen(nk);
    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i], lens[i]);
        op->argv[3 + i] = p;
        op->lens[3 + i] = lens[i];
        p += lens[i];
    }
    op->argc = total;
    op->script = script;
    op->nkeys = !writes ? 0 : nkeys < argc ? nkeys : argc;
    return submit(st, op, 1, total, (const char **)op->argv, op->lens);
}

/* --- the single connection as a transport (transport.h); its ctx is the store --- */

static bool single_send(void *ctx, int flags, store_cb cb, void *data, int kind, int script,
                        int nkeys, int ncmds, const store_cmd *cmds)
{
    store *st = ctx;
    if (kind == TRANSPORT_EXEC)
        return single_exec(st, flags, cb, data, ncmds, cmds);
    if (kind == TRANSPORT_SCRIPT)
        return single_script(st, flags, script, cb, data, nkeys, cmds[0].argc, cmds[0].argv,
                             cmds[0].lens);
    return single_command(st, flags, cb, data, cmds[0].argc, cmds[0].argv, cmds[0].lens);
}

static bool single_ready(const void *ctx)
{
    const store *st = ctx;
    return st->state == ST_READY;
}

static bool single_connected(const void *ctx)
{
    const store *st = ctx;
    return st->state == ST_HANDSHAKE || st->state == ST_READY;
}

static size_t single_pending(const void *ctx)
{
    const store *st = ctx;
    return st->pending;
}

static const store_stats *single_stats(const void *ctx)
{
    const store *st = ctx;
    return &st->stats;
}

static void single_close(void *ctx);

static void single_free(void *ctx)
{
    store *st = ctx;
    sentinel_free(st->sen);
}

/* The node view: one node, the store's own connection, owning every slot. */

static int single_node_count(const void *ctx)
{
    (void)ctx;
    return 1;
}

static bool single_node_owners(const void *ctx, bool *owns)
{
    (void)ctx;
    owns[0] = true;
    return true;
}

static bool single_node_ready(const void *ctx, int node)
{
    (void)node;
    return single_ready(ctx);
}

static transport_at single_node_at(const void *ctx, int node)
{
    (void)node;
    const store *st = ctx;
    return (transport_at){st->at.host, st->at.user, st->at.password, st->at.port};
}

static void single_node_control(void *ctx, int node, store_cb cb, void *data, int argc,
                                const char **argv, const size_t *lens)
{
    (void)node;
    single_command(ctx, SEND_CONTROL, cb, data, argc, argv, lens);
}

/* Nothing to mark: a read goes tracked only while the read cache is on (store_read.c), and it
 * is on only while this connection's tracking is confirmed. */
static void single_node_set_tracked(void *ctx, int node, bool tracked)
{
    (void)ctx;
    (void)node;
    (void)tracked;
}

/* The store's listener (store_set_listener) heard as node 0's events; not while closing, as
 * the cluster's. */
static void single_node_heard(void *ctx, bool ready)
{
    store *st = ctx;
    if (st->node_listener && st->state != ST_CLOSED)
        st->node_listener(st->node_listener_ctx, ready ? TRANSPORT_NODE_READY : TRANSPORT_NODE_DOWN,
                          0);
}

static void single_node_listen(void *ctx, transport_listener fn, void *fn_ctx)
{
    store *st = ctx;
    st->node_listener = fn;
    st->node_listener_ctx = fn_ctx;
    store_set_listener(st, fn ? single_node_heard : NULL, fn ? st : NULL);
}

const store_transport store_single_transport = {single_send,
                                                single_ready,
                                                single_connected,
                                                single_pending,
                                                single_stats,
                                                single_close,
                                                single_free,
                                                single_node_count,
                                                single_node_owners,
                                                single_node_ready,
                                                single_node_at,
                                                single_node_control,
                                                single_node_set_tracked,
                                                single_node_listen};

/* --- connection life --- */

static void on_reconnect_timer(uv_timer_t *t)
{
    start_connect(t->data);
}

static void schedule_reconnect(store *st)
{
    if (st->state == ST_CLOSED)
        return;
    st->state = ST_DOWN;
    link_retry_schedule(&st->retry, on_reconnect_timer);
}

static void on_handshake_reply(void *data, int status, redisReply *reply)
{
    store *st = data;
    if (st->state != ST_HANDSHAKE)
        return;
    if (status == STORE_UNAVAILABLE)
        return; /* the connection is already going; on_disconnect retries */
    if (status == STORE_TIMEOUT || reply->type == REDIS_REPLY_ERROR) {
        buf *l = log_begin(LOG_ERROR, "redis handshake failed");
        if (l) {
            log_str(l, "detail", status == STORE_OK ? reply->str : "no reply in time");
            log_end(l);
        }
        if (st->ac)
            redisAsyncDisconnect(st->ac);
        return;
    }
    if (--st->handshake_left == 0) {
        st->state = ST_READY;
        link_retry_reset(&st->retry);
        log_event(LOG_INFO, "redis ready", NULL);
        if (st->listener)
            st->listener(st->listener_ctx, true);
    }
}

/* Sentinel mode: the node the sentinels named must say it is a primary (a failover may be
 * under way, or the answer was stale); otherwise the connection goes and the sentinels are
 * asked again. */
static void on_role_reply(void *data, int status, redisReply *reply)
{
    store *st = data;
    if (st->state == ST_HANDSHAKE && status == STORE_OK && reply->type == REDIS_REPLY_ARRAY &&
        (reply->elements < 1 || reply->element[0]->type != REDIS_REPLY_STRING ||
         strcmp(reply->element[0]->str, "master"))) {
        log_event(LOG_WARN, "redis node named by the sentinels is not a primary", NULL);
        if (st->ac)
            redisAsyncDisconnect(st->ac);
        return;
    }
    on_handshake_reply(data, status, reply);
}

/* Sends AUTH, SELECT and SCRIPT LOAD for every script (and ROLE first in sentinel mode);
 * ready after the last answer. */
static void handshake(store *st)
{
    st->state = ST_HANDSHAKE;
    st->handshake_left = 0;
    const char *argv[3];
    size_t lens[3];
    store_op *op;
    int argc = link_auth_argv(st->at.user, st->at.password, argv, lens);
    if (argc) {
        if ((op = op_new(st, on_handshake_reply, st, 0))) {
            st->handshake_left++;
            submit(st, op, 1, argc, argv, lens);
        }
    }
    if (st->sen && (op = op_new(st, on_role_reply, st, 0))) {
        argv[0] = "ROLE";
        lens[0] = 4;
        st->handshake_left++;
        submit(st, op, 1, 1, argv, lens);
    }
    char dbs[16];
    snprintf(dbs, sizeof dbs, "%d", st->at.db);
    argv[0] = "SELECT";
    lens[0] = 6;
    argv[1] = dbs;
    lens[1] = strlen(dbs);
    if ((op = op_new(st, on_handshake_reply, st, 0))) {
        st->handshake_left++;
        submit(st, op, 1, 2, argv, lens);
    }
    for (int i = 0; i < LUA_SCRIPT_COUNT; i++) {
        argv[0] = "SCRIPT";
        lens[0] = 6;
        argv[1] = "LOAD";
        lens[1] = 4;
        argv[2] = lua_scripts[i].source;
        lens[2] = strlen(lua_scripts[i].source);
        if ((op = op_new(st, on_handshake_reply, st, 0))) {
            st->handshake_left++;
            submit(st, op, 1, 3, argv, lens);
        }
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    store *st = ac->data;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback. */
        st->ac = NULL;
        if (log_enabled(LOG_DEBUG))
            log_event(LOG_DEBUG, "redis connect failed", ac->errstr);
        schedule_reconnect(st);
        return;
    }
    log_event(LOG_INFO, "redis connected", NULL);
    handshake(st);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    store *st = ac->data;
    st->ac = NULL;
    st->stats.disconnects++;
    /* Down before the listener hears it: a command it sends is refused, not sent to a
     * connection that is gone. */
    if (st->state != ST_CLOSED)
        st->state = ST_DOWN;
    if (st->listener)
        st->listener(st->listener_ctx, false);
    if (st->state == ST_CLOSED)
        return;
    log_event(LOG_WARN, "redis disconnected", status == REDIS_OK ? NULL : ac->errstr);
    schedule_reconnect(st);
}

/* Connects to the address the host resolved to: hiredis's own lookup of a numeric address
 * does not block. */
static void on_resolved(void *data, int status, const char *numeric)
{
    store *st = data;
    if (st->state == ST_CLOSED)
        return; /* store_close ran meanwhile; the store itself lives until store_free */
    if (status != 0) {
        if (!st->resolve_failing || log_enabled(LOG_DEBUG)) {
            buf *l =
                log_begin(st->resolve_failing ? LOG_DEBUG : LOG_WARN, "redis host not resolved");
            if (l) {
                log_str(l, "host", st->at.host);
                log_str(l, "detail", uv_strerror(status));
                log_end(l);
            }
        }
        st->resolve_failing = true;
        schedule_reconnect(st);
        return;
    }
    st->resolve_failing = false;
    st->ac = redis_uv_connect(st->app->loop, numeric, st->at.port, st, &redis_reply_functions,
                              on_connect, on_disconnect);
    if (!st->ac)
        schedule_reconnect(st);
}

/* Sentinel mode: the primary the sentinels name is where the next connect goes. */
static void on_primary_found(void *ctx, int status, const char *host, int port)
{
    store *st = ctx;
    if (st->state == ST_CLOSED)
        return;
    if (status != 0) {
        if (!st->resolve_failing)
            log_event(LOG_WARN, "redis primary unknown: no sentinel named it", NULL);
        st->resolve_failing = true;
        schedule_reconnect(st);
        return;
    }
    if (strcmp(host, st->at.host) || port != st->at.port) {
        buf *l = log_begin(LOG_INFO, "redis primary");
        if (l) {
            log_str(l, "host", host);
            log_int(l, "port", port);
            log_end(l);
        }
        snprintf(st->at.host, sizeof st->at.host, "%s", host);
        st->at.port = port;
    }
    resolve_start(&st->resolver, st->app->loop, st->at.host, on_resolved, st);
}

/* A sentinel announced a new primary: the connection to the old one goes (its pending
 * commands are answered STORE_UNAVAILABLE: their outcome is unknown), and the reconnect asks
 * the sentinels where to go. */
static void on_switch(void *ctx)
{
    store *st = ctx;
    st->switches++;
    if (st->state == ST_CLOSED || !st->ac)
        return;
    redisAsyncContext *ac = st->ac;
    st->ac = NULL;
    st->state = ST_DOWN;
    redisAsyncFree(ac); /* on_disconnect schedules the reconnect */
}

static void start_connect(store *st)
{
    if (st->state == ST_CLOSED)
        return;
    st->state = ST_CONNECTING;
    st->stats.reconnects++;
    if (st->sen) {
        sentinel_lookup(st->sen, on_primary_found, st);
        return;
    }
    /* Resolved again before every attempt: the host may have moved (a failover by DNS). */
    resolve_start(&st->resolver, st->app->loop, st->at.host, on_resolved, st);
}

void store_set_listener(store *st, store_listener fn, void *ctx)
{
    st->listener = fn;
    st->listener_ctx = ctx;
}

int store_new(store **out, app *a, char *err, size_t err_len)
{
    store *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    st->app = a;
    st->tp = &store_single_transport;
    st->tp_ctx = st;
    if (a->cfg.redis_cluster_nodes && a->cfg.redis_cluster_nodes[0]) {
        /* Cluster mode: REDIS_URL is not used; the cluster owns every connection. */
        if (cluster_new(&st->cl, a, err, err_len) != 0) {
            free(st);
            return -1;
        }
        st->tp = &cluster_transport;
        st->tp_ctx = st->cl;
        for (int i = 0; i < LUA_SCRIPT_COUNT; i++)
            memcpy(st->shas[i], lua_scripts[i].sha1, 41);
        st->state = ST_READY; /* the store's own connection is unused: readiness is the cluster's */
        metrics_register(store_render_metrics, st);
        *out = st;
        return 0;
    }
    if (a->cfg.redis_sentinels && a->cfg.redis_sentinels[0]) {
        /* Sentinel mode: the address comes from the sentinels, the credentials from
         * REDIS_USERNAME/REDIS_PASSWORD, the database is 0. */
        if (sentinel_new(&st->sen, a, on_switch, st, err, err_len) != 0) {
            free(st);
            return -1;
        }
        snprintf(st->at.user, sizeof st->at.user, "%s", a->cfg.redis_username);
        snprintf(st->at.password, sizeof st->at.password, "%s", a->cfg.redis_password);
    } else if (resolve_parse_url(a->cfg.redis_url, &st->at, err, err_len) != 0) {
        free(st);
        return -1;
    }
    for (int i = 0; i < LUA_SCRIPT_COUNT; i++)
        memcpy(st->shas[i], lua_scripts[i].sha1, 41);
    uv_timer_init(a->loop, &st->tick);
    st->tick.data = st;
    link_retry_init(&st->retry, a->loop, st);
    st->state = ST_DOWN;
    start_connect(st);
    metrics_register(store_render_metrics, st);
    *out = st;
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    store *st = h->data;
    st->handles_open--;
}

void store_close(store *st)
{
    if (st->state == ST_CLOSED)
        return;
    st->state = ST_CLOSED;
    st->tp->close(st->tp_ctx);
}

static void single_close(void *ctx)
{
    store *st = ctx;
    /* A resolution under way still calls back (on_resolved sees ST_CLOSED); the loop runs
     * until it has, before store_free. */
    resolve_cancel(&st->resolver);
    sentinel_close(st->sen);
    if (st->ac) {
        redisAsyncContext *ac = st->ac;
        st->ac = NULL;
        /* Runs every pending callback with NULL, then on_disconnect. */
        redisAsyncFree(ac);
    }
    while (st->ops.head)
        op_answer((store_op *)st->ops.head, STORE_UNAVAILABLE, NULL);
    st->handles_open = 2;
    uv_close((uv_handle_t *)&st->tick, on_timer_closed);
    uv_close((uv_handle_t *)&st->retry.timer, on_timer_closed);
}

void store_free(store *st)
{
    if (st) {
        st->tp->free(st->tp_ctx);
        free(st);
    }
    redis_reply_release_cache();
}
