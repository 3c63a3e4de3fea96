/* command: what every sender of Redis commands shares (the store's one connection and the
 * cluster's connections): how a command is given, how its answer comes back, the counters.
 * Types only, so that both include it and neither the other's header. */
#ifndef ENTITYD_COMMAND_H
#define ENTITYD_COMMAND_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

enum store_status {
    STORE_OK = 0,      /* reply is Redis's answer (which may be an error reply) */
    STORE_UNAVAILABLE, /* not connected, or the connection dropped: reply is NULL */
    STORE_TIMEOUT,     /* no answer within REDIS_TIMEOUT_MS: reply is NULL; a late one is dropped */
};

/* Called exactly once per command. `reply` is valid only during the call. */
typedef void (*store_cb)(void *data, int status, redisReply *reply);

typedef struct store_stats {
    uint64_t commands, errors, timeouts, reconnects, disconnects;
    uint64_t shed; /* units refused for REDIS_MAX_PENDING, nothing sent */
} store_stats;

/* One command of a transaction. */
typedef struct store_cmd {
    int argc;
    const char **argv;
    const size_t *lens;
} store_cmd;

/* Flags of store_read() (store.h): a read that may be kept but not answered from the cache,
 * and a command that keeps room for the read that follows it, STORE_RESERVED_CMDS commands. */
#define STORE_READ_NO_HIT  1
#define STORE_READ_RESERVE 2
/* A credential's check (revocation, session, API key): before an answer from the read cache,
 * the invalidations already waiting in the tracking connections' sockets are read, so that a
 * revocation Redis has announced is seen by the next request (store_set_fresh). */
#define STORE_READ_FRESH    4
#define STORE_RESERVED_CMDS 16

#endif
