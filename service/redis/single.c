/* single: the one pipelined Redis connection, a transport (transport.h): deadlines, reconnects,
 * Lua scripts by SHA. Where it connects is its locator's (single.h); framing, keys and backoff
 * are link.c's.
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
#include "redis/single.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/readcache.h"
#include "core/app.h"
#include "core/buf.h"
#include "core/log.h"
#include "redis/link.h"
#include "redis/lua_scripts.h"
#include "redis/redis_uv.h"
#include "redis/reply.h"
#include "redis/send.h"

enum single_state { ST_DOWN, ST_CONNECTING, ST_HANDSHAKE, ST_READY, ST_CLOSED };

struct single {
    app *app;
    const single_locator *loc; /* owns loc_ctx */
    void *loc_ctx;
    resolve_url *at; /* the caller's: where to connect, with the credentials and database */
    redisAsyncContext *ac;
    int state;
    link_list ops; /* the deadline list */
    uv_timer_t tick;
    link_retry retry;
    resolver resolver;    /* the host, before each connect */
    bool resolve_failing; /* the last lookup failed: logged once until one succeeds */
    uint64_t last_progress_ms;
    size_t outstanding; /* ops handed to hiredis and not yet called back */
    size_t pending;     /* commands handed to hiredis and not yet answered (see the top) */
    int handshake_left;
    store_stats stats;
    store_listener notify;
    void *notify_ctx;
    transport_listener node_listener; /* the node view's (tracking.h): node 0 is this one */
    void *node_listener_ctx;
    int handles_open;
};

typedef struct single_op {
    link_entry le; /* in the deadline list while unanswered; first, so a cast finds the op */
    single *c;
    store_cb cb; /* NULL once answered */
    void *data;
    int script; /* -1, or the script to resend with EVAL on NOSCRIPT */
    int nkeys;  /* a script's keys, argv[3..]: invalidated in the read cache on its answer */
    int cmds;   /* commands this op accounts for in `pending` until its answer */
    int argc;
    char **argv; /* for script ops: a private copy, in the same allocation as the op */
    size_t *lens;
    size_t extra; /* bytes allocated past the op (0: a plain op, recycled) */
} single_op;

/* Plain ops are recycled: one malloc/free pair per command otherwise. Loop thread only. */
#define OP_CACHE_MAX 256
static single_op *op_cache;
static int op_cached;

static void single_op_free(single_op *op)
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
static int single_caching_yes(redisAsyncContext *ac)
{
    static const char caching[] = "*3\r\n$6\r\nCLIENT\r\n$7\r\nCACHING\r\n$3\r\nyes\r\n";
    return redisAsyncFormattedCommand(ac, NULL, NULL, caching, sizeof caching - 1);
}

static void single_connect(single *c);

/* Answers an op once; hiredis may still hold it. */
static void single_op_answer(single_op *op, int status, redisReply *reply)
{
    store_cb cb = op->cb;
    op->cb = NULL;
    link_list_unlink(&op->c->ops, &op->le);
    if (status == STORE_TIMEOUT)
        op->c->stats.timeouts++;
    if (reply && reply->type == REDIS_REPLY_ERROR)
        op->c->stats.errors++;
    cb(op->data, status, reply);
}

/* Drops the connection at once. Free, not disconnect: hiredis's disconnect waits for every
 * pending reply, and a silent or replaced server sends none. Freeing answers them all (NULL),
 * and on_disconnect schedules the reconnect. */
static void single_cut(single *c)
{
    redisAsyncContext *ac = c->ac;
    c->ac = NULL;
    c->state = ST_DOWN;
    redisAsyncFree(ac);
}

static void single_on_tick(uv_timer_t *t)
{
    single *c = t->data;
    uint64_t now = uv_now(c->app->loop);
    for (link_entry *e; (e = link_list_expired(&c->ops, now));)
        single_op_answer((single_op *)e, STORE_TIMEOUT, NULL);
    if (c->ac && link_stalled(c->app, c->outstanding, c->last_progress_ms, now)) {
        log_event(LOG_WARN, "redis stalled: reconnecting", NULL);
        c->last_progress_ms = now;
        single_cut(c);
    }
    if (!c->ops.head && !c->outstanding)
        uv_timer_stop(&c->tick);
}

static void single_on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    single_op *op = privdata;
    single *c = op->c;
    redisReply *reply = r;
    c->outstanding--;
    /* Replies come in order: EXEC's answer means MULTI's and the QUEUED ones came before. */
    c->pending -= (size_t)op->cmds;
    op->cmds = 0;
    if (reply)
        c->last_progress_ms = uv_now(c->app->loop);
    if (reply && op->nkeys > 0 && readcache_enabled(c->app->reads))
        for (int i = 0; i < op->nkeys; i++)
            if (op->script < 0 || i >= 32 || !(lua_scripts[op->script].read_only_keys >> i & 1))
                readcache_invalidate(c->app->reads, op->argv[3 + i], op->lens[3 + i]);
    if (op->cb) {
        if (reply && op->script >= 0 && reply->type == REDIS_REPLY_ERROR &&
            !strncmp(reply->str, "NOSCRIPT", 8) && ac == c->ac && c->state == ST_READY) {
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
            if (redisAsyncCommandArgv(ac, single_on_reply, op, op->argc, argv, op->lens) ==
                REDIS_OK) {
                c->outstanding++;
                c->pending++;
                op->cmds = 1;
                return;
            }
            op->script = s;
        }
        single_op_answer(op, reply ? STORE_OK : STORE_UNAVAILABLE, reply);
    }
    single_op_free(op);
}

static single_op *single_op_new(single *c, store_cb cb, void *data, size_t extra)
{
    single_op *op;
    if (extra == 0 && op_cache) {
        op = op_cache;
        op_cache = (single_op *)op->le.next;
        op_cached--;
    } else if (!(op = malloc(sizeof *op + extra))) {
        return NULL;
    }
    memset(op, 0, sizeof *op);
    op->extra = extra;
    op->c = c;
    op->cb = cb;
    op->data = data;
    op->script = -1;
    op->le.deadline_ms = uv_now(c->app->loop) + (uint64_t)c->app->cfg.redis_timeout_ms;
    return op;
}

/* Sends the op's command, the last of `cmds` commands of its unit (the others already queued
 * without a callback). Returns true when the op was answered (and freed) already. */
static bool single_submit(single *c, single_op *op, int cmds, int argc, const char **argv,
                          const size_t *lens)
{
    if (link_send(c->ac, single_on_reply, op, argc, argv, lens) != REDIS_OK) {
        store_cb cb = op->cb;
        void *data = op->data;
        single_op_free(op);
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    c->stats.commands++;
    if (c->outstanding++ == 0)
        c->last_progress_ms = uv_now(c->app->loop);
    op->cmds = cmds;
    c->pending += (size_t)cmds;
    link_list_push(&c->ops, &op->le);
    if (!uv_is_active((uv_handle_t *)&c->tick))
        uv_timer_start(&c->tick, single_on_tick, LINK_TICK_MS, LINK_TICK_MS);
    return false;
}

/* True when a unit of n commands cannot go: not ready, or refused for REDIS_MAX_PENDING
 * (send.h). */
static bool single_refused(single *c, int flags, size_t n)
{
    if (c->state != ST_READY)
        return true;
    if (!send_refused(c->pending, (size_t)c->app->cfg.redis_max_pending, flags, n))
        return false;
    c->stats.shed++;
    return true;
}

/* A unit of one command. */
static bool single_command(single *c, int flags, store_cb cb, void *data, int argc,
                           const char **argv, const size_t *lens)
{
    bool track = flags & SEND_TRACK;
    single_op *op = NULL;
    if (single_refused(c, flags, track ? 2 : 1) || !(op = single_op_new(c, cb, data, 0))) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    int cmds = 1;
    if (track && single_caching_yes(c->ac) == REDIS_OK) {
        c->stats.commands++;
        cmds++;
    }
    return single_submit(c, op, cmds, argc, argv, lens);
}

static void single_on_exec_reply(void *data, int status, redisReply *reply)
{
    single_op *inner = data; /* carries the caller's callback */
    single *c = inner->c;
    if (status == STORE_OK && c->ac && link_exec_lost_script(reply))
        link_reload_scripts(c->ac);
    store_cb cb = inner->cb;
    void *cb_data = inner->data;
    single_op_free(inner);
    cb(cb_data, status, reply);
}

/* A transaction. */
static bool single_exec(single *c, int flags, store_cb cb, void *data, int ncmds,
                        const store_cmd *cmds)
{
    bool track = flags & SEND_TRACK;
    /* MULTI, the commands, EXEC, and CLIENT CACHING when tracked. */
    int total = ncmds + 2 + (track ? 1 : 0);
    if (single_refused(c, flags, (size_t)total)) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    /* The caller's callback rides in a spare op so that EXEC's answer is looked at first. */
    single_op *inner = single_op_new(c, cb, data, 0);
    single_op *op = inner ? single_op_new(c, single_on_exec_reply, inner, 0) : NULL;
    if (!op) {
        if (inner)
            single_op_free(inner);
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    /* MULTI and the QUEUED answers carry no callback: EXEC's reply says it all, and a dropped
     * connection answers EXEC's op with NULL like any other. */
    static const char *multi[] = {"MULTI"};
    static const size_t multi_len[] = {5};
    int rc = track ? single_caching_yes(c->ac) : REDIS_OK;
    if (rc == REDIS_OK)
        rc = link_send(c->ac, NULL, NULL, 1, multi, multi_len);
    for (int i = 0; rc == REDIS_OK && i < ncmds; i++)
        rc = link_send(c->ac, NULL, NULL, cmds[i].argc, cmds[i].argv, cmds[i].lens);
    if (rc != REDIS_OK) {
        single_op_free(op);
        single_op_free(inner);
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    c->stats.commands += (uint64_t)total - 1;
    static const char *exec_cmd[] = {"EXEC"};
    static const size_t exec_len[] = {4};
    return single_submit(c, op, total, 1, exec_cmd, exec_len);
}

/* A script: EVALSHA, resent with the source on NOSCRIPT. */
static bool single_script(single *c, int send, int script, store_cb cb, void *data, int nkeys,
                          int argc, const char **argv, const size_t *lens)
{
    bool writes = send & SEND_WRITES;
    if (single_refused(c, send, 1)) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return true;
    }
    /* One allocation: the op, then argv pointers, lengths and the bytes, kept for a resend. */
    int total = argc + 3;
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += lens[i];
    size_t extra = (size_t)total * (sizeof(char *) + sizeof(size_t)) + bytes + BUF_INT_SIZE;
    single_op *op = single_op_new(c, cb, data, extra);
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
    op->argv[1] = (char *)lua_scripts[script].sha1;
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
    return single_submit(c, op, 1, total, (const char **)op->argv, op->lens);
}

/* --- the transport table --- */

static bool single_send(void *ctx, int flags, store_cb cb, void *data, int kind, int script,
                        int nkeys, int ncmds, const store_cmd *cmds)
{
    single *c = ctx;
    if (kind == TRANSPORT_EXEC)
        return single_exec(c, flags, cb, data, ncmds, cmds);
    if (kind == TRANSPORT_SCRIPT)
        return single_script(c, flags, script, cb, data, nkeys, cmds[0].argc, cmds[0].argv,
                             cmds[0].lens);
    return single_command(c, flags, cb, data, cmds[0].argc, cmds[0].argv, cmds[0].lens);
}

static bool single_ready(const void *ctx)
{
    const single *c = ctx;
    return c->state == ST_READY;
}

static bool single_connected(const void *ctx)
{
    const single *c = ctx;
    return c->state == ST_HANDSHAKE || c->state == ST_READY;
}

static size_t single_pending(const void *ctx)
{
    const single *c = ctx;
    return c->pending;
}

static const store_stats *single_stats(const void *ctx)
{
    const single *c = ctx;
    return &c->stats;
}

static void single_close(void *ctx);
static void single_free(void *ctx);

/* --- the node view: one node, this connection, owning every slot --- */

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
    const single *c = ctx;
    return (transport_at){c->at->host, c->at->user, c->at->password, c->at->port};
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

static void single_node_listen(void *ctx, transport_listener fn, void *fn_ctx)
{
    single *c = ctx;
    c->node_listener = fn;
    c->node_listener_ctx = fn_ctx;
}

const store_transport single_transport = {
    .send = single_send,
    .ready = single_ready,
    .connected = single_connected,
    .pending = single_pending,
    .stats = single_stats,
    .close = single_close,
    .free = single_free,
    .node_count = single_node_count,
    .node_owners = single_node_owners,
    .node_ready = single_node_ready,
    .node_at = single_node_at,
    .node_control = single_node_control,
    .node_set_tracked = single_node_set_tracked,
    .node_listen = single_node_listen,
};

/* The store's listener, then node 0's (not while closing, as the cluster's). */
static void single_tell(single *c, bool ready)
{
    c->notify(c->notify_ctx, ready);
    if (c->node_listener && c->state != ST_CLOSED)
        c->node_listener(c->node_listener_ctx, ready ? TRANSPORT_NODE_READY : TRANSPORT_NODE_DOWN,
                         0);
}

/* --- connection life --- */

static void single_on_retry(uv_timer_t *t)
{
    single_connect(t->data);
}

static void single_schedule_reconnect(single *c)
{
    if (c->state == ST_CLOSED)
        return;
    c->state = ST_DOWN;
    link_retry_schedule(&c->retry, single_on_retry);
}

static void single_on_handshake_reply(void *data, int status, redisReply *reply)
{
    single *c = data;
    if (c->state != ST_HANDSHAKE)
        return;
    if (status == STORE_UNAVAILABLE)
        return; /* the connection is already going; on_disconnect retries */
    if (status == STORE_TIMEOUT || reply->type == REDIS_REPLY_ERROR) {
        buf *l = log_begin(LOG_ERROR, "redis handshake failed");
        if (l) {
            log_str(l, "detail", status == STORE_OK ? reply->str : "no reply in time");
            log_end(l);
        }
        if (c->ac)
            redisAsyncDisconnect(c->ac);
        return;
    }
    if (--c->handshake_left == 0) {
        c->state = ST_READY;
        link_retry_reset(&c->retry);
        log_event(LOG_INFO, "redis ready", NULL);
        single_tell(c, true);
    }
}

/* The locator's check of the node (a node named as primary may no longer be one): when the
 * node will not do, the connection goes and the locator is asked again. */
static void single_on_check_reply(void *data, int status, redisReply *reply)
{
    single *c = data;
    if (c->state == ST_HANDSHAKE && status == STORE_OK && !c->loc->check(c->loc_ctx, reply)) {
        if (c->ac)
            redisAsyncDisconnect(c->ac);
        return;
    }
    single_on_handshake_reply(data, status, reply);
}

/* Sends one command of the handshake. */
static void single_handshake_send(single *c, store_cb cb, int argc, const char **argv,
                                  const size_t *lens)
{
    single_op *op = single_op_new(c, cb, c, 0);
    if (op) {
        c->handshake_left++;
        single_submit(c, op, 1, argc, argv, lens);
    }
}

/* Sends AUTH, the locator's check, SELECT and SCRIPT LOAD for every script; ready after the
 * last answer. */
static void single_handshake(single *c)
{
    c->state = ST_HANDSHAKE;
    c->handshake_left = 0;
    const char *argv[3];
    size_t lens[3];
    int argc = link_auth_argv(c->at->user, c->at->password, argv, lens);
    if (argc)
        single_handshake_send(c, single_on_handshake_reply, argc, argv, lens);
    if (c->loc->check_argv && (argc = c->loc->check_argv(c->loc_ctx, argv, lens)))
        single_handshake_send(c, single_on_check_reply, argc, argv, lens);
    char dbs[16];
    snprintf(dbs, sizeof dbs, "%d", c->at->db);
    argv[0] = "SELECT";
    lens[0] = 6;
    argv[1] = dbs;
    lens[1] = strlen(dbs);
    single_handshake_send(c, single_on_handshake_reply, 2, argv, lens);
    for (int i = 0; i < LUA_SCRIPT_COUNT; i++) {
        argv[0] = "SCRIPT";
        lens[0] = 6;
        argv[1] = "LOAD";
        lens[1] = 4;
        argv[2] = lua_scripts[i].source;
        lens[2] = strlen(lua_scripts[i].source);
        single_handshake_send(c, single_on_handshake_reply, 3, argv, lens);
    }
}

static void single_on_connect(const redisAsyncContext *ac, int status)
{
    single *c = ac->data;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback. */
        c->ac = NULL;
        if (log_enabled(LOG_DEBUG))
            log_event(LOG_DEBUG, "redis connect failed", ac->errstr);
        single_schedule_reconnect(c);
        return;
    }
    log_event(LOG_INFO, "redis connected", NULL);
    single_handshake(c);
}

static void single_on_disconnect(const redisAsyncContext *ac, int status)
{
    single *c = ac->data;
    c->ac = NULL;
    c->stats.disconnects++;
    /* Down before the listener hears it: a command it sends is refused, not sent to a
     * connection that is gone. */
    if (c->state != ST_CLOSED)
        c->state = ST_DOWN;
    single_tell(c, false);
    if (c->state == ST_CLOSED)
        return;
    log_event(LOG_WARN, "redis disconnected", status == REDIS_OK ? NULL : ac->errstr);
    single_schedule_reconnect(c);
}

/* Connects to the address the host resolved to: hiredis's own lookup of a numeric address
 * does not block. */
static void single_on_resolved(void *data, int status, const char *numeric)
{
    single *c = data;
    if (c->state == ST_CLOSED)
        return; /* closed meanwhile; the connection itself lives until single_free */
    if (status != 0) {
        if (!c->resolve_failing || log_enabled(LOG_DEBUG)) {
            buf *l =
                log_begin(c->resolve_failing ? LOG_DEBUG : LOG_WARN, "redis host not resolved");
            if (l) {
                log_str(l, "host", c->at->host);
                log_str(l, "detail", uv_strerror(status));
                log_end(l);
            }
        }
        c->resolve_failing = true;
        single_schedule_reconnect(c);
        return;
    }
    c->resolve_failing = false;
    c->ac = redis_uv_connect(c->app->loop, numeric, c->at->port, c, &redis_reply_functions,
                             single_on_connect, single_on_disconnect);
    if (!c->ac)
        single_schedule_reconnect(c);
}

/* The locator's answer: the host it named is resolved again before every connect (the host
 * may have moved: a failover by DNS). */
static void single_on_found(single *c, const char *missing)
{
    if (c->state == ST_CLOSED)
        return;
    if (missing) {
        if (!c->resolve_failing)
            log_event(LOG_WARN, missing, NULL);
        c->resolve_failing = true;
        single_schedule_reconnect(c);
        return;
    }
    resolve_start(&c->resolver, c->app->loop, c->at->host, single_on_resolved, c);
}

static void single_connect(single *c)
{
    if (c->state == ST_CLOSED)
        return;
    c->state = ST_CONNECTING;
    c->stats.reconnects++;
    c->loc->find(c->loc_ctx, c->at, single_on_found, c);
}

void single_drop(single *c)
{
    if (c->state == ST_CLOSED || !c->ac)
        return;
    single_cut(c);
}

/* --- the fixed address of REDIS_URL --- */

static void single_url_find(void *ctx, resolve_url *at, single_found_fn found, single *c)
{
    (void)ctx;
    (void)at;
    found(c, NULL);
}

const single_locator single_url_locator = {NULL, single_url_find, NULL, NULL, NULL, NULL};

/* --- life --- */

int single_new(single **out, app *a, resolve_url *at, const single_locator *loc, void *loc_ctx,
               store_listener notify, void *notify_ctx, char *err, size_t err_len)
{
    single *c = calloc(1, sizeof *c);
    if (!c) {
        if (loc->free)
            loc->free(loc_ctx);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    *c = (single){.app = a,
                  .loc = loc,
                  .loc_ctx = loc_ctx,
                  .at = at,
                  .notify = notify,
                  .notify_ctx = notify_ctx,
                  .state = ST_DOWN};
    uv_timer_init(a->loop, &c->tick);
    c->tick.data = c;
    link_retry_init(&c->retry, a->loop, c);
    if (loc->start)
        loc->start(loc_ctx, c);
    single_connect(c);
    *out = c;
    return 0;
}

static void single_on_timer_closed(uv_handle_t *h)
{
    single *c = h->data;
    c->handles_open--;
}

static void single_close(void *ctx)
{
    single *c = ctx;
    if (c->state == ST_CLOSED)
        return;
    c->state = ST_CLOSED;
    /* A resolution under way still calls back (single_on_resolved sees ST_CLOSED); the loop
     * runs until it has, before single_free. */
    resolve_cancel(&c->resolver);
    if (c->loc->close)
        c->loc->close(c->loc_ctx);
    if (c->ac) {
        redisAsyncContext *ac = c->ac;
        c->ac = NULL;
        /* Runs every pending callback with NULL, then on_disconnect. */
        redisAsyncFree(ac);
    }
    while (c->ops.head)
        single_op_answer((single_op *)c->ops.head, STORE_UNAVAILABLE, NULL);
    c->handles_open = 2;
    uv_close((uv_handle_t *)&c->tick, single_on_timer_closed);
    uv_close((uv_handle_t *)&c->retry.timer, single_on_timer_closed);
}

static void single_free(void *ctx)
{
    single *c = ctx;
    if (c->loc->free)
        c->loc->free(c->loc_ctx);
    free(c);
}
