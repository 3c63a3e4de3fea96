/* store_int: what the store's files share: store.c (the one pipelined connection, the single
 * transport), store_api.c (the calls, through the transport table) and store_read.c (reads
 * through the read cache). Internal to those three files. */
#ifndef ENTITYD_STORE_INT_H
#define ENTITYD_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/async.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "redis/cluster.h"
#include "redis/command.h"
#include "redis/link.h"
#include "redis/lua_scripts.h"
#include "redis/resolve.h"
#include "redis/sentinel.h"
#include "redis/store.h"
#include "redis/transport.h"

struct app;

enum state { ST_DOWN, ST_CONNECTING, ST_HANDSHAKE, ST_READY, ST_CLOSED };

struct store {
    struct app *app;
    const store_transport *tp; /* where every unit goes: single_transport, or the cluster's */
    void *tp_ctx;
    cluster *cl;   /* cluster mode: the transport's ctx, for the tracking's per-node view */
    sentinel *sen; /* sentinel mode: where to connect is asked before each connect */
    uint64_t switches;
    redisAsyncContext *ac;
    int state;
    resolve_url at; /* where to connect: REDIS_URL, or the primary the sentinels name */
    link_list ops;  /* the deadline list */
    uv_timer_t tick;
    link_retry retry;
    resolver resolver;    /* the host, before each connect */
    bool resolve_failing; /* the last resolution failed: logged once until one succeeds */
    uint64_t last_progress_ms;
    size_t outstanding; /* ops handed to hiredis and not yet called back */
    size_t pending;     /* commands handed to hiredis and not yet answered (see the top) */
    int handshake_left;
    char shas[LUA_SCRIPT_COUNT][41];
    store_stats stats;
    store_listener listener;
    void *listener_ctx;
    transport_listener node_listener; /* the node view's (transport.h), heard through listener */
    void *node_listener_ctx;
    int handles_open;
};

/* The transport of the one pipelined connection; its ctx is the store. */
extern const store_transport store_single_transport;
/* The metrics source (core/metrics.h) of the store. */
void store_render_metrics(buf *out, void *ctx);

/* store_command and store_exec with SEND_* flags (send.h); true when cb has already run. */
bool store_send_command(store *st, int flags, store_cb cb, void *data, int argc, const char **argv,
                        const size_t *lens);
bool store_send_exec(store *st, int flags, store_cb cb, void *data, int ncmds,
                     const store_cmd *cmds);
/* The store's own connection is ready (always true in cluster mode, where the cluster sends). */
bool store_link_ready(const store *st);
struct app *store_app(const store *st);

#endif
