/* single: the one pipelined connection as a transport (transport.h), for single Redis and for
 * the primary the sentinels name. How it finds its node is its locator's: the connection itself
 * knows no mode. Internal to redis/. */
#ifndef ENTITYD_SINGLE_H
#define ENTITYD_SINGLE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#include "redis/resolve.h"
#include "redis/store.h"
#include "redis/transport.h"

struct app;
typedef struct single single;

/* The locator's answer: NULL when it wrote the node to the address it was given, else why it
 * found none (logged once while lookups fail; the connect is retried with backoff). */
typedef void (*single_found_fn)(single *c, const char *missing);

/* How the connection finds its node, and whether the node it reached will do. */
typedef struct single_locator {
    /* Once, before the first connect: the connection to tell when the node moves
     * (single_drop). NULL when the node never moves on its own. */
    void (*start)(void *ctx, single *c);
    /* Before every connect: writes host and port to `at` (the credentials and the database
     * stay) and calls found exactly once, now or later. */
    void (*find)(void *ctx, resolve_url *at, single_found_fn found, single *c);
    /* A command the handshake sends before the others, into argv/lens (room for 3); returns
     * its argc, 0 for none. NULL: none. */
    int (*check_argv)(void *ctx, const char *argv[3], size_t lens[3]);
    /* Its answer: false when the node will not do (the connection goes, and find is asked
     * again). */
    bool (*check)(void *ctx, const redisReply *reply);
    void (*close)(void *ctx);
    /* After the loop has stopped. */
    void (*free)(void *ctx);
} single_locator;

/* The locator of a fixed address (REDIS_URL): the host is resolved again before every
 * connect, so a move by DNS is still followed. Its ctx is unused. */
extern const single_locator single_url_locator;

/* The transport; its ctx is the single connection. */
extern const store_transport single_transport;

/* Starts connecting to where `loc` finds the node, with the credentials and database of `at`
 * (the caller's, kept up to date with the node in use until single_free). The connection
 * owns loc_ctx from here on, even when this fails. `notify` hears when the connection turns
 * ready and when it goes. Returns 0, or -1 with a sentence in err. */
int single_new(single **out, struct app *a, resolve_url *at, const single_locator *loc,
               void *loc_ctx, store_listener notify, void *notify_ctx, char *err, size_t err_len);
/* The node is no longer the one to use: the connection goes (its pending commands are answered
 * STORE_UNAVAILABLE: their outcome is unknown) and the reconnect asks the locator again. */
void single_drop(single *c);

#endif
