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

struct app;
typedef struct cluster cluster;

#define CLUSTER_MAX_HOPS  5
#define CLUSTER_MAX_NODES 64

enum cluster_kind { CLUSTER_COMMAND, CLUSTER_EXEC, CLUSTER_SCRIPT };

/* Parses the seeds (a->cfg.redis_cluster_nodes) and starts connecting to them. Returns 0, or
 * -1 with a sentence in err when the list is malformed. */
int cluster_new(cluster **out, struct app *a, char *err, size_t err_len);
/* Answers every unit STORE_UNAVAILABLE, closes the connections and timers; no reconnect. */
void cluster_close(cluster *cl);
/* After the loop has stopped. */
void cluster_free(cluster *cl);
/* The slot map covers all 16384 slots and every primary in it is connected with its scripts. */
bool cluster_ready(const cluster *cl);
size_t cluster_pending(const cluster *cl);
const store_stats *cluster_stats(const cluster *cl);

/* Sends a unit with SEND_* flags (send.h). CLUSTER_COMMAND: cmds[0]; CLUSTER_EXEC: ncmds
 * commands in MULTI/EXEC; CLUSTER_SCRIPT: cmds[0] holds nkeys keys then the arguments of
 * script `script`, run by EVALSHA. cb runs exactly once; returns true when it already has. */
bool cluster_send(cluster *cl, int flags, store_cb cb, void *data, int kind, int script, int nkeys,
                  int ncmds, const store_cmd *cmds);

#endif
