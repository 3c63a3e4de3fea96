/* tracking: the read cache's invalidations (Redis's client-side caching, RESP2 style), per
 * node of the store's transport (the node view, store.h): one node for a single Redis or the
 * primary the sentinels name, every primary for a cluster. It never asks which.
 *
 * For every node that owns slots: a second connection to that same node, subscribed to
 * __redis__:invalidate and to a heartbeat channel of its own, and CLIENT TRACKING ... REDIRECT
 * <that connection> OPTIN on the node's pipelined connection (REDIRECT needs a client of the
 * same server). Every second a PUBLISH to the node's channel goes out on its pipelined
 * connection and must come back on its invalidation connection within 3 s: a silent connection
 * must not leave answers standing that nothing would invalidate. A PUBLISH reaches every node
 * of a cluster over the bus, so each node's channel is its own: only that node's connection
 * listens to it, and hearing it proves that node's two connections.
 *
 * The cache is on only while every slot has an owner and every node that owns slots has its
 * tracking confirmed. It is emptied (and every read in flight voided) when any of that stops
 * holding (either connection of a node goes, or the node moves: a new primary), when a
 * heartbeat is late, and whenever a slot changes owner (MOVED, a map refresh, a failover):
 * everything, not only the moved slots' answers; a change of owner is rare and one miss per
 * kept answer is its whole cost. */
#ifndef ENTITYD_TRACKING_H
#define ENTITYD_TRACKING_H

#include "redis/invalidation.h"

struct app;
typedef struct tracking tracking;

/* Listens to the store's nodes (store_node_listen; a->store must exist) and drives a->reads.
 * NULL when out of memory: the cache then stays off. */
tracking *tracking_new(struct app *a);
/* Closes the connections and timers, for a clean exit; the cache goes off. */
void tracking_close(tracking *tr);
/* After the loop has stopped. */
void tracking_free(tracking *tr);
const tracking_stats *tracking_get_stats(const tracking *tr);

#endif
