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
} store_transport;

#endif
