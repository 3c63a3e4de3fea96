/* store: the service's way to Redis, one API in the three modes (single Redis, Sentinel,
 * Cluster): commands, transactions and Lua scripts by SHA, with deadlines and reconnects, and
 * reads through the read cache. */
#ifndef ENTITYD_STORE_H
#define ENTITYD_STORE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/readcache.h"
#include "redis/command.h"

struct app;
typedef struct store store;

/* Parses REDIS_URL and starts connecting (retrying with backoff for as long as it runs).
 * Returns 0, or -1 with a sentence in err when the URL is malformed. */
int store_new(store **out, struct app *a, char *err, size_t err_len);
/* Who hears when the store turns ready and when its connection goes: the read cache's
 * invalidation connection (tracking.h), which must follow the store's connection. One. */
typedef void (*store_listener)(void *ctx, bool ready);
void store_set_listener(store *st, store_listener fn, void *ctx);
/* Closes the connection: pending commands are answered STORE_UNAVAILABLE, later ones too; no
 * reconnect. The store stays valid for late callers until store_free(). */
void store_close(store *st);
/* Frees the store; only after the loop has stopped. */
void store_free(store *st);
/* Connected, authenticated and every script loaded. */
bool store_ready(const store *st);
const store_stats *store_get_stats(const store *st);
/* Commands sent to Redis and not yet answered (a transaction counts all of its commands). */
size_t store_pending(const store *st);
bool store_connected(const store *st);
/* Cluster mode (REDIS_CLUSTER_NODES): units go to the node owning their first key's slot, so
 * two units sent one after the other may be answered in either order. */
bool store_cluster_mode(const store *st);
/* The cluster behind the store in cluster mode (for the backfill's per-node scans), else
 * NULL. */
struct cluster *store_cluster(const store *st);

/* Sends one command; argv/lens are copied by hiredis before this returns. When the store is
 * not ready, or REDIS_MAX_PENDING commands are waiting for their answer (load shedding; the
 * same for every call below), cb runs before this returns, with STORE_UNAVAILABLE. */
void store_command(store *st, store_cb cb, void *data, int argc, const char **argv,
                   const size_t *lens);
/* The same, for a request's check that its own read follows (STORE_READ_NO_HIT) on the same
 * connection: room is kept for that read (STORE_READ_RESERVE). Never through the read cache.
 * Returns true when cb has already run (the store not ready, or the command shed). */
bool store_command_ahead(store *st, store_cb cb, void *data, int argc, const char **argv,
                         const size_t *lens);
/* The same for the service's own upkeep (the read cache's tracking request and heartbeat): the
 * last few commands below REDIS_MAX_PENDING are kept for it, so requests filling the rest do
 * not starve it; at the cap itself it is shed too (Redis is then not answering, and a missed
 * heartbeat turns the read cache off, as it should). A few per second at most. */
void store_control(store *st, store_cb cb, void *data, int argc, const char **argv,
                   const size_t *lens);
/* Sends MULTI, the commands and EXEC in one pipelined write: atomic, one round trip. cb gets
 * EXEC's reply (one reply per command). Scripts inside it run by SHA (store_script_sha); a
 * NOSCRIPT among the replies makes the store load its scripts again. */
void store_exec(store *st, store_cb cb, void *data, int ncmds, const store_cmd *cmds);
/* The SHA-1 of a script, for EVALSHA inside store_exec. */
const char *store_script_sha(const store *st, int script);

/* Runs a script by its id (lua_scripts.h) with EVALSHA; argv holds nkeys keys then the
 * arguments. A NOSCRIPT answer is retried once with the script's source. When its answer
 * arrives, its keys are invalidated in the read cache before cb runs: a write's own caller
 * never reads what it replaced. */
void store_script(store *st, int script, store_cb cb, void *data, int nkeys, int argc,
                  const char **argv, const size_t *lens);
/* The same for a script that only reads (contrib_list.lua): its
 * answer leaves the read cache as it is. flags: 0, or STORE_READ_NO_HIT for a read bound to a
 * command already sent with STORE_READ_RESERVE (never shed; see store_read). */
void store_script_read(store *st, int flags, int script, store_cb cb, void *data, int nkeys,
                       int argc, const char **argv, const size_t *lens);

/* Reads through the read cache (readcache.h, the app's `reads`): each command reads the one
 * key at its argv[1]. When the cache holds the answer, cb runs with it before this returns
 * (an answer from the cache sends nothing and is never shed);
 * otherwise the read goes to Redis tracked (CLIENT CACHING yes in front) and its answer is
 * kept. With STORE_READ_NO_HIT the cache may keep the answer but not give one: for a read
 * that must be answered after commands already sent; such a read is never shed. So that it
 * never passes REDIS_MAX_PENDING either, the command sent before it asks with
 * STORE_READ_RESERVE for room for it too: STORE_RESERVED_CMDS commands, more than any read of
 * the service sends (a users page with the role lookups, tracked, is 9). Returns true when cb
 * has already run (an answer from the cache, the store not ready, or the read shed). */
/* STORE_READ_NO_HIT, STORE_READ_RESERVE, STORE_RESERVED_CMDS: redis/command.h */
bool store_read(store *st, int flags, store_cb cb, void *data, int argc, const char **argv,
                const size_t *lens);
/* The same for a transaction (store_exec) of such reads. */
bool store_read_exec(store *st, int flags, store_cb cb, void *data, int ncmds,
                     const store_cmd *cmds);
/* The same, kept in the read cache under `key` instead of the commands' bytes, so that a hit
 * frames, hashes and compares only the key. The key is the caller's description of the read:
 * it names every input the commands are built from (two reads with one key must be the same
 * commands), and begins with a byte other than '*' and 'M', with which framed reads begin.
 * The keys the read depends on are still taken from the commands. */
bool store_read_exec_as(store *st, int flags, const char *key, size_t key_len, store_cb cb,
                        void *data, int ncmds, const store_cmd *cmds);

/* For a reader that learns a plain read's answer inside a larger read (a gated read whose
 * first reply is that very HMGET, api/entity.h): the cache's answer to the one command, without
 * sending anything (NULL when it holds none; valid as readcache_get's); a ticket for it, taken
 * before the larger read is sent; and the answer kept under the one command's bytes, unless its
 * key changed since the ticket (readcache_put). store_read of the command then hits it. */
const redisReply *store_read_peek(store *st, int argc, const char **argv, const size_t *lens);
void store_read_ticket(store *st, readcache_ticket *t, int argc, const char **argv,
                       const size_t *lens);
void store_read_keep(store *st, const readcache_ticket *t, int argc, const char **argv,
                     const size_t *lens, const redisReply *reply);

/* Where a node is, with the credentials its connections use (the invalidation connection's,
 * tracking.h). */
typedef struct store_endpoint {
    const char *host, *user, *password;
    int port;
} store_endpoint;

/* The read cache's tracking hands the store its drain: run before a STORE_READ_FRESH read is
 * answered from the cache, it reads the invalidations already in its sockets (NULL: none). */
void store_set_fresh(store *st, void (*fn)(void *ctx), void *ctx);

/* The node view of the store's transport (transport.h), for the read cache's tracking
 * (tracking.h): the nodes units go to, numbered from 0; a single Redis, or the primary the
 * sentinels name, is node 0. */
int store_node_count(const store *st);
/* owns (TRANSPORT_MAX_NODES entries): set for every node that owns slots. True when every
 * slot has an owner. */
bool store_node_owners(const store *st, bool *owns);
bool store_node_ready(const store *st, int node);
store_endpoint store_node_at(const store *st, int node);
/* store_control on this node's pipelined connection. */
void store_node_control(store *st, int node, store_cb cb, void *data, int argc, const char **argv,
                        const size_t *lens);
/* This node's connection tracks reads (its CLIENT TRACKING confirmed), or no longer. */
void store_node_set_tracked(store *st, int node, bool tracked);
/* One listener of the nodes' events (enum transport_event); NULL to stop. */
typedef void (*store_node_listener)(void *ctx, int event, int node);
void store_node_listen(store *st, store_node_listener fn, void *ctx);

#endif
