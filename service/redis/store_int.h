/* store_int: what the store's files share: store.c (the core: picks the transport, the
 * listener), store_api.c (the calls, through the transport table; the metrics) and
 * store_read.c (reads through the read cache). Internal to those three files. */
#ifndef ENTITYD_STORE_INT_H
#define ENTITYD_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "redis/command.h"
#include "redis/resolve.h"
#include "redis/store.h"
#include "redis/transport.h"

struct app;
struct cluster;

struct store {
    struct app *app;
    const store_transport *tp; /* where every unit goes: the single connection, or the cluster */
    void *tp_ctx;
    struct cluster *cl; /* cluster mode: the transport's ctx, for the tracking's per-node view */
    resolve_url at;     /* the single connection's address, kept up to date by it (tracking.h) */
    bool closed;
    store_listener listener;
    void *listener_ctx;
    void (*fresh)(void *ctx); /* store_set_fresh's: reads the invalidations waiting */
    void *fresh_ctx;
};

/* The metrics source (core/metrics.h) of the store. */
void store_render_metrics(buf *out, void *ctx);

/* store_command and store_exec with SEND_* flags (send.h); true when cb has already run. */
bool store_send_command(store *st, int flags, store_cb cb, void *data, int argc, const char **argv,
                        const size_t *lens);
bool store_send_exec(store *st, int flags, store_cb cb, void *data, int ncmds,
                     const store_cmd *cmds);
/* Units may go tracked through the read cache: the single connection is ready; always in
 * cluster mode, where each node's readiness is looked at as its units go. */
bool store_link_ready(const store *st);
struct app *store_app(const store *st);

#endif
