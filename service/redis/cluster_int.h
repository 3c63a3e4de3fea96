/* cluster_int: what cluster.c (the units: routing, redirects, retries, deadlines) and
 * cluster_node.c (the nodes: the slot map and one connection per node) share. Internal to
 * those two files. */
#ifndef ENTITYD_CLUSTER_INT_H
#define ENTITYD_CLUSTER_INT_H

#include <hiredis/async.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "redis/cluster.h"
#include "redis/link.h"
#include "redis/resolve.h"
#include "redis/slot.h"

struct app;

#define HOST_SIZE        64
#define MAX_TRIES        6    /* retries of CLUSTERDOWN or a primary not connected */
#define MAX_MOVING_TRIES 64   /* of TRYAGAIN: the unit's deadline bounds them first */
#define RETRY_BASE_MS    10   /* the first retry's wait, doubled for each one after */
#define RETRY_MAX_MS     200  /* so six retries wait about 0.6 s in all */
#define REFRESH_MIN_MS   100  /* between two CLUSTER SLOTS: a burst of MOVED asks once */
#define REFRESH_IDLE_MS  1000 /* while the map is incomplete or a primary is down */
#define REFRESH_LIMIT_MS 2000 /* a CLUSTER SLOTS unanswered this long is given up */
#define NO_NODE          -1

enum nstate { N_DOWN, N_CONNECTING, N_HANDSHAKE, N_READY, N_CLOSED };

typedef struct cl_node {
    cluster *cl;
    int idx;
    char host[HOST_SIZE];
    int port;
    char name[HOST_SIZE + 8]; /* host:port, for logs and metrics */
    redisAsyncContext *ac;
    int state;
    int handshake_left;
    resolver resolver;
    bool resolver_used;
    link_retry retry;
    size_t outstanding; /* callbacks hiredis holds on this connection */
    uint64_t last_progress_ms;
    uint64_t redirects, reconnects, disconnects;
    bool tracked; /* this connection's CLIENT TRACKING is confirmed (cluster_node_set_tracked) */
    uint64_t scripts_stopped; /* scripts Redis stopped midway (script_stopped_midway) */
} cl_node;

typedef struct cl_op {
    link_entry le;     /* in the deadline list while unanswered; first, so a cast finds the op */
    struct cl_op *due; /* retries collected by the tick */
    cluster *cl;
    store_cb cb; /* NULL once answered */
    void *data;
    uint64_t retry_at;
    int kind, script, nkeys, slot;
    int flags;      /* SEND_* */
    int fixed_node; /* NO_NODE, or the node an upkeep command goes to (cluster_node_control) */
    int hops, tries;
    int node;     /* the node holding it (holds > 0) */
    int ask_node; /* NO_NODE, or the ASK target it goes to behind ASKING */
    bool reload;  /* SCRIPT LOAD goes first (after NOSCRIPT) */
    int holds;    /* hiredis callbacks that name this op */
    int cmds;     /* commands it accounts for in `pending` while held */
    int redirect; /* SLOT_ERR_* a queued command of the transaction answered */
    int r_slot, r_port;
    char r_host[HOST_SIZE];
    int ncmds;
    store_cmd *cmds_copy;
} cl_op;

struct cluster {
    struct app *app;
    bool closed;
    cl_node *nodes[CLUSTER_MAX_NODES];
    int nnodes;
    int16_t map[SLOT_COUNT]; /* slot -> node index, or NO_NODE */
    int covered;             /* slots with a node */
    link_list ops;           /* the deadline list */
    int parked;              /* ops waiting for a retry */
    uv_timer_t tick;
    bool refresh_busy, refresh_again;
    uint64_t refresh_started_ms, refresh_last_ms;
    int refresh_rr;
    size_t pending;
    uint64_t refreshes, redirects;
    store_stats stats;
    int handles_open;
    cluster_listener listener;
    void *listener_ctx;
};

/* The node at host:port, made and connecting when new; NULL when the table is full. */
cl_node *cluster_node_get(cluster *cl, const char *host, int port);
/* Asks a connected node for the slot map (at most once per REFRESH_MIN_MS). */
void cluster_refresh(cluster *cl);
/* Tells the listener (cluster_set_listener) of a node's or the map's change. */
void cluster_notify(cluster *cl, int event, int node);
/* The metrics source (core/metrics.h) of the cluster's nodes and slot map. */
void cluster_render_metrics(buf *out, void *ctx);

#endif
