/* server: the listening socket, the set of client connections, and the drain on shutdown. */
#ifndef ENTITYD_SERVER_H
#define ENTITYD_SERVER_H

#include <stdint.h>
#include <uv.h>

#include "conn.h"

struct app;

typedef struct server {
    struct app *app;
    uv_tcp_t listener;
    uv_timer_t drain_timer;
    conn_set conns; /* every client connection; HTTP is their protocol */
    int port;       /* the bound port (useful with PORT=0) */
    int draining;
    void (*on_drained)(struct server *srv); /* called once every connection is closed */
} server;

/* Binds and listens on HOST:PORT. Returns 0 or a negative libuv error. */
int server_start(server *srv, struct app *app);
/* Stops accepting; closes idle connections and lets busy ones finish their request, for at
 * most SHUTDOWN_TIMEOUT_MS; then on_drained runs. */
void server_drain(server *srv);
/* Closes the handles the server still holds (after on_drained). */
void server_close(server *srv);

#endif
