/* store: the store's core: it picks the transport its units go through (transport.h) at
 * store_new, and owns the listener and the metrics. The calls are store_api.c's, the reads
 * through the read cache store_read.c's; the transports are the single connection (single.c,
 * found by REDIS_URL or by the sentinels, sentinel.c) and the cluster (cluster.c). */
#include "redis/store.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/app.h"
#include "core/metrics.h"
#include "redis/cluster.h"
#include "redis/reply.h"
#include "redis/sentinel.h"
#include "redis/single.h"
#include "redis/store_int.h"

/* The transport's word that it turned ready or went, for whoever listens. */
static void store_notify(void *ctx, bool ready)
{
    store *st = ctx;
    if (st->listener)
        st->listener(st->listener_ctx, ready);
}

/* The single connection, to REDIS_URL or to the primary the sentinels name. In Sentinel mode
 * the address comes from the sentinels, the credentials from REDIS_USERNAME/REDIS_PASSWORD,
 * the database is 0. */
static int store_new_single(store *st, app *a, char *err, size_t err_len)
{
    const single_locator *loc = &single_url_locator;
    void *loc_ctx = NULL;
    if (a->cfg.redis_sentinels && a->cfg.redis_sentinels[0]) {
        sentinel *sen;
        if (sentinel_new(&sen, a, err, err_len) != 0)
            return -1;
        loc = &sentinel_locator;
        loc_ctx = sen;
        snprintf(st->at.user, sizeof st->at.user, "%s", a->cfg.redis_username);
        snprintf(st->at.password, sizeof st->at.password, "%s", a->cfg.redis_password);
    } else if (resolve_parse_url(a->cfg.redis_url, &st->at, err, err_len) != 0) {
        return -1;
    }
    single *c;
    if (single_new(&c, a, &st->at, loc, loc_ctx, store_notify, st, err, err_len) != 0)
        return -1;
    st->tp = &single_transport;
    st->tp_ctx = c;
    return 0;
}

int store_new(store **out, app *a, char *err, size_t err_len)
{
    store *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    st->app = a;
    int rc;
    if (a->cfg.redis_cluster_nodes && a->cfg.redis_cluster_nodes[0]) {
        /* Cluster mode: REDIS_URL is not used; the cluster owns every connection. */
        rc = cluster_new(&st->cl, a, err, err_len);
        st->tp = &cluster_transport;
        st->tp_ctx = st->cl;
    } else {
        rc = store_new_single(st, a, err, err_len);
    }
    if (rc != 0) {
        free(st);
        return -1;
    }
    metrics_register(store_render_metrics, st);
    *out = st;
    return 0;
}

void store_set_listener(store *st, store_listener fn, void *ctx)
{
    st->listener = fn;
    st->listener_ctx = ctx;
}

struct app *store_app(const store *st)
{
    return st->app;
}

void store_close(store *st)
{
    if (st->closed)
        return;
    st->closed = true;
    st->tp->close(st->tp_ctx);
}

void store_free(store *st)
{
    if (st) {
        st->tp->free(st->tp_ctx);
        free(st);
    }
    redis_reply_release_cache();
}
