/* cluster: the store's commands over a Redis Cluster (REDIS_CLUSTER_NODES). Internal to redis/;
 * callers keep using store.h, whose functions hand their units here in cluster mode.
 *
 * A unit (one command, a MULTI/EXEC transaction, or a script) goes to the primary owning the
 * slot of its first key, on that primary's one pipelined connection. A transaction's or a
 * script's keys must share that slot (entity keys share their hash tag): a unit that spans
 * slots is a bug and is refused. MOVED updates the slot map (and refreshes it from CLUSTER
 * SLOTS, once per burst) and resends; ASK resends once to the target behind ASKING; TRYAGAIN,
 * CLUSTERDOWN and a primary not connected yet are retried with a short backoff, a few times;
 * NOSCRIPT loads every script on that node and resends. At most CLUSTER_MAX_HOPS redirects per
 * unit, and every resend keeps the unit's first deadline. A unit whose connection drops after
 * it was sent is answered STORE_UNAVAILABLE (Redis may or may not have run it): never resent. */
#ifndef ENTITYD_CLUSTER_H
#define ENTITYD_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "redis/command.h"
#include "redis/transport.h"

struct app;
typedef struct cluster cluster;

#define CLUSTER_MAX_HOPS  5
#define CLUSTER_MAX_NODES TRANSPORT_MAX_NODES

enum cluster_kind {
    CLUSTER_COMMAND = TRANSPORT_COMMAND,
    CLUSTER_EXEC = TRANSPORT_EXEC,
    CLUSTER_SCRIPT = TRANSPORT_SCRIPT
};

/* Parses the seeds (a->cfg.redis_cluster_nodes) and starts connecting to them. Returns 0, or
 * -1 with a sentence in err when the list is malformed. */
int cluster_new(cluster **out, struct app *a, char *err, size_t err_len);
/* Answers every unit STORE_UNAVAILABLE, closes the connections and timers; no reconnect. */
void cluster_close(cluster *cl);
/* After the loop has stopped. */
void cluster_free(cluster *cl);
/* The store's transport (transport.h) over a cluster; its ctx is the cluster. */
extern const store_transport cluster_transport;
/* The slot map covers all 16384 slots and every primary in it is connected with its scripts. */
bool cluster_ready(const cluster *cl);
size_t cluster_pending(const cluster *cl);
const store_stats *cluster_stats(const cluster *cl);

/* Sends a unit with SEND_* flags (send.h). CLUSTER_COMMAND: cmds[0]; CLUSTER_EXEC: ncmds
 * commands in MULTI/EXEC; CLUSTER_SCRIPT: cmds[0] holds nkeys keys then the arguments of
 * script `script`, run by EVALSHA. cb runs exactly once; returns true when it already has. */
bool cluster_send(cluster *cl, int flags, store_cb cb, void *data, int kind, int script, int nkeys,
                  int ncmds, const store_cmd *cmds);

/* --- the node view of the transport (transport.h), for the read cache's tracking --- */

/* What the cluster tells its listener: a node's connection is ready (its CLIENT TRACKING, if
 * any, went with the old one), a node's connection went, or a slot changed owner. */
enum cluster_event {
    CLUSTER_NODE_READY = TRANSPORT_NODE_READY,
    CLUSTER_NODE_DOWN = TRANSPORT_NODE_DOWN,
    CLUSTER_MAP_CHANGED = TRANSPORT_MAP_CHANGED
};
typedef transport_listener cluster_listener;
/* One listener. While one is set the slot map is also asked for every REFRESH_IDLE_MS, so that
 * a change of owner is learnt even when every read is answered from memory. */
void cluster_set_listener(cluster *cl, cluster_listener fn, void *ctx);

/* Nodes are numbered from 0 and live until cluster_free; count only grows. */
int cluster_node_count(const cluster *cl);
bool cluster_node_ready(const cluster *cl, int node);
const char *cluster_node_host(const cluster *cl, int node);
int cluster_node_port(const cluster *cl, int node);
/* owns[i] is set for every node the slot map gives slots to. Returns true when the map covers
 * all 16384 slots. Walks the map: for events and timers, not per request. */
bool cluster_owners(const cluster *cl, bool owns[CLUSTER_MAX_NODES]);
/* Says that this node's current connection tracks reads (CLIENT TRACKING confirmed): tracked
 * reads (SEND_TRACK) sent to it go behind CLIENT CACHING yes. Cleared when the connection
 * goes. A tracked read sent where this does not hold, or behind ASKING, goes untracked and its
 * keys are invalidated, so that its answer is never kept. */
void cluster_node_set_tracked(cluster *cl, int node, bool tracked);
/* Sends one command of the service's upkeep on this node's connection (not routed by key);
 * STORE_UNAVAILABLE at once when that connection is not ready. cb runs exactly once. */
void cluster_node_control(cluster *cl, int node, store_cb cb, void *data, int argc,
                          const char **argv, const size_t *lens);

#endif
