/* store_api: the store's calls (store.h): every unit goes through the transport table
 * (transport.h) to the single connection (single.c) or to the cluster (cluster.c), without
 * naming either, and so does the node view; and the store's metrics. */
#include <stdbool.h>
#include <stddef.h>

#include "core/app.h"
#include "core/metrics.h"
#include "redis/lua_scripts.h"
#include "redis/send.h"
#include "redis/store.h"
#include "redis/store_int.h"
#include "redis/transport.h"

/* store_command with SEND_* flags; returns true when cb has already run. */
bool store_send_command(store *st, int flags, store_cb cb, void *data, int argc, const char **argv,
                        const size_t *lens)
{
    store_cmd one = {argc, argv, lens};
    return st->tp->send(st->tp_ctx, flags, cb, data, TRANSPORT_COMMAND, -1, 0, 1, &one);
}

void store_command(store *st, store_cb cb, void *data, int argc, const char **argv,
                   const size_t *lens)
{
    store_send_command(st, 0, cb, data, argc, argv, lens);
}

bool store_command_ahead(store *st, store_cb cb, void *data, int argc, const char **argv,
                         const size_t *lens)
{
    return store_send_command(st, SEND_RESERVE, cb, data, argc, argv, lens);
}

void store_control(store *st, store_cb cb, void *data, int argc, const char **argv,
                   const size_t *lens)
{
    store_send_command(st, SEND_CONTROL, cb, data, argc, argv, lens);
}

const char *store_script_sha(const store *st, int script)
{
    (void)st;
    return lua_scripts[script].sha1;
}

/* store_exec with SEND_* flags; returns true when cb has already run. */
bool store_send_exec(store *st, int flags, store_cb cb, void *data, int ncmds,
                     const store_cmd *cmds)
{
    return st->tp->send(st->tp_ctx, flags, cb, data, TRANSPORT_EXEC, -1, 0, ncmds, cmds);
}

void store_exec(store *st, store_cb cb, void *data, int ncmds, const store_cmd *cmds)
{
    store_send_exec(st, 0, cb, data, ncmds, cmds);
}

static void send_script(store *st, int send, int script, store_cb cb, void *data, int nkeys,
                        int argc, const char **argv, const size_t *lens, bool writes)
{
    store_cmd one = {argc, argv, lens};
    st->tp->send(st->tp_ctx, send | (writes ? SEND_WRITES : 0), cb, data, TRANSPORT_SCRIPT, script,
                 nkeys, 1, &one);
}

void store_script(store *st, int script, store_cb cb, void *data, int nkeys, int argc,
                  const char **argv, const size_t *lens)
{
    send_script(st, 0, script, cb, data, nkeys, argc, argv, lens, true);
}

void store_script_read(store *st, int flags, int script, store_cb cb, void *data, int nkeys,
                       int argc, const char **argv, const size_t *lens)
{
    int send = (flags & STORE_READ_NO_HIT) ? SEND_ANY_CAP : 0;
    send_script(st, send, script, cb, data, nkeys, argc, argv, lens, false);
}

bool store_ready(const store *st)
{
    return st->tp->ready(st->tp_ctx);
}

bool store_link_ready(const store *st)
{
    return st->cl || st->tp->ready(st->tp_ctx);
}

bool store_connected(const store *st)
{
    return st->tp->connected(st->tp_ctx);
}

bool store_cluster_mode(const store *st)
{
    return st->cl != NULL;
}

struct cluster *store_cluster(const store *st)
{
    return st->cl;
}

const store_stats *store_get_stats(const store *st)
{
    return st->tp->stats(st->tp_ctx);
}

size_t store_pending(const store *st)
{
    return st->tp->pending(st->tp_ctx);
}

/* --- the node view: the transport's, forwarded --- */

int store_node_count(const store *st)
{
    return st->tp->node_count(st->tp_ctx);
}

bool store_node_owners(const store *st, bool *owns)
{
    return st->tp->node_owners(st->tp_ctx, owns);
}

bool store_node_ready(const store *st, int node)
{
    return st->tp->node_ready(st->tp_ctx, node);
}

store_endpoint store_node_at(const store *st, int node)
{
    transport_at at = st->tp->node_at(st->tp_ctx, node);
    return (store_endpoint){at.host, at.user, at.password, at.port};
}

void store_node_control(store *st, int node, store_cb cb, void *data, int argc, const char **argv,
                        const size_t *lens)
{
    st->tp->node_control(st->tp_ctx, node, cb, data, argc, argv, lens);
}

void store_node_set_tracked(store *st, int node, bool tracked)
{
    st->tp->node_set_tracked(st->tp_ctx, node, tracked);
}

void store_node_listen(store *st, store_node_listener fn, void *ctx)
{
    st->tp->node_listen(st->tp_ctx, fn, ctx);
}

/* The metrics source (core/metrics.h) of the Redis connection. */
void store_render_metrics(buf *out, void *ctx)
{
    const store *st = ctx;
    metrics_gauge(out, "entityd_redis_connected",
                  "1 when Redis is connected and the scripts are loaded.", store_ready(st) ? 1 : 0);
    const store_stats *s = store_get_stats(st);
    metrics_counter(out, "entityd_redis_commands_total", "Commands sent to Redis.", s->commands);
    metrics_counter(out, "entityd_redis_errors_total", "Error replies from Redis.", s->errors);
    metrics_counter(out, "entityd_redis_timeouts_total", "Commands past REDIS_TIMEOUT_MS.",
                    s->timeouts);
    metrics_counter(out, "entityd_redis_connects_total", "Connection attempts to Redis.",
                    s->reconnects);
    metrics_counter(out, "entityd_redis_disconnects_total", "Redis connections lost.",
                    s->disconnects);
    metrics_gauge(out, "entityd_redis_pending_commands",
                  "Commands sent to Redis and not yet answered (capped by REDIS_MAX_PENDING).",
                  (double)store_pending(st));
    metrics_counter(
        out, "entityd_redis_shed_total",
        "Commands or transactions refused at once (503) for REDIS_MAX_PENDING; nothing sent.",
        s->shed);
}
