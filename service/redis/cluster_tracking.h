/* cluster_tracking: the read cache's invalidations over a Redis Cluster (tracking.h does it for
 * one Redis). Internal to redis/: tracking_new() starts it in cluster mode.
 *
 * For every node that owns slots: a second connection to that same node, subscribed to
 * __redis__:invalidate and to a heartbeat channel of its own, and CLIENT TRACKING ... REDIRECT
 * <that connection> OPTIN on the node's pipelined connection (cluster.c; REDIRECT needs a
 * client of the same server). Every second a PUBLISH to the node's channel goes out on its
 * pipelined connection and must come back on its invalidation connection within 3 s. A PUBLISH
 * reaches every node of a cluster over the bus, so each node's channel is its own: only that
 * node's connection listens to it, and hearing it proves that node's two connections.
 *
 * The cache is on only while the slot map covers every slot and every node that owns slots has
 * its tracking confirmed. It is emptied (and every read in flight voided) when any of that
 * stops holding, when a heartbeat is late, and whenever a slot changes owner (MOVED, a map
 * refresh, a failover): everything, not only the moved slots' answers; a change of owner is
 * rare and one miss per kept answer is its whole cost. */
#ifndef ENTITYD_CLUSTER_TRACKING_H
#define ENTITYD_CLUSTER_TRACKING_H

#include "redis/cluster.h"
#include "redis/invalidation.h"

struct app;
typedef struct cluster_tracking cluster_tracking;

/* Listens to the cluster (cluster_set_listener) and drives a->reads. NULL when out of memory:
 * the cache then stays off. */
cluster_tracking *cluster_tracking_new(struct app *a, cluster *cl);
/* Closes the connections and timers; the cache goes off. */
void cluster_tracking_close(cluster_tracking *ct);
/* After the loop has stopped. */
void cluster_tracking_free(cluster_tracking *ct);
const tracking_stats *cluster_tracking_get_stats(const cluster_tracking *ct);

#endif
