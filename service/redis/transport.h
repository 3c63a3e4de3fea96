/* transport: how the store's units reach Redis, as a table of callbacks: the store calls its
 * transport through it and never names it (the request core and its protocols in h2o do the
 * same). Two transports: the one pipelined connection (single Redis, or the primary the
 * sentinels name; single.c) and the cluster's connections (cluster.c). Internal to redis/. */
#ifndef ENTITYD_TRANSPORT_H
#define ENTITYD_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "redis/command.h"

/* A unit: one command (cmds[0]), MULTI/EXEC around ncmds commands, or cmds[0] holding nkeys
 * keys then the arguments of Lua script `script`, run by EVALSHA. */
enum transport_unit { TRANSPORT_COMMAND, TRANSPORT_EXEC, TRANSPORT_SCRIPT };

/* The node view (the last members of the table), for the read cache's tracking (tracking.h):
 * the nodes units may go to, numbered from 0, each with its own pipelined connection. The one
 * connection of a single Redis (or of the primary the sentinels name) is node 0. */
#define TRANSPORT_MAX_NODES 64

/* What a transport tells its node listener: a node's connection is ready (its CLIENT
 * TRACKING, if any, went with the old one), a node's connection went, or a slot changed
 * owner. */
enum transport_event { TRANSPORT_NODE_READY, TRANSPORT_NODE_DOWN, TRANSPORT_MAP_CHANGED };
typedef void (*transport_listener)(void *ctx, int event, int node);

/* Where a node is, and the credentials its connections use. */
typedef struct transport_at {
    const char *host, *user, *password;
    int port;
} transport_at;

typedef struct store_transport {
    /* Sends a unit with SEND_* flags (send.h); cb runs exactly once, STORE_UNAVAILABLE at once
     * when the unit cannot go. Returns true when cb has already run. */
    bool (*send)(void *ctx, int flags, store_cb cb, void *data, int kind, int script, int nkeys,
                 int ncmds, const store_cmd *cmds);
    /* Connected, authenticated and every script loaded (where the units go). */
    bool (*ready)(const void *ctx);
    /* Connected, maybe still in its handshake. */
    bool (*connected)(const void *ctx);
    /* Commands sent and not yet answered. */
    size_t (*pending)(const void *ctx);
    const store_stats *(*stats)(const void *ctx);
    /* Answers every unit STORE_UNAVAILABLE and closes; no reconnect. */
    void (*close)(void *ctx);
    /* After the loop has stopped; frees what the transport owns. */
    void (*free)(void *ctx);

    /* --- the node view --- */
    /* Nodes known so far; the count only grows and a node lives until free. */
    int (*node_count)(const void *ctx);
    /* owns[i] set for every node that owns slots (TRANSPORT_MAX_NODES entries); true when
     * every slot has an owner. For events and timers, not per request. */
    bool (*node_owners)(const void *ctx, bool *owns);
    /* The node's pipelined connection is ready. */
    bool (*node_ready)(const void *ctx, int node);
    transport_at (*node_at)(const void *ctx, int node);
    /* Sends one upkeep command (SEND_CONTROL) on the node's connection, not routed by key;
     * STORE_UNAVAILABLE at once when it is not ready. cb runs exactly once. */
    void (*node_control)(void *ctx, int node, store_cb cb, void *data, int argc, const char **argv,
                         const size_t *lens);
    /* The node's current connection tracks reads (CLIENT TRACKING confirmed), or no longer. */
    void (*node_set_tracked)(void *ctx, int node, bool tracked);
    /* One listener of node events; NULL to stop. */
    void (*node_listen)(void *ctx, transport_listener fn, void *fn_ctx);
} store_transport;

#endif
