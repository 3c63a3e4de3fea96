/* server: the listening socket, open connections, their timers and writes, and the drain. */
#ifndef ENTITYD_SERVER_H
#define ENTITYD_SERVER_H

#include <stdint.h>
#include <uv.h>

#include "http.h"

struct app;

typedef struct server {
    struct app *app;
    uv_tcp_t listener;
    uv_timer_t drain_timer;
    uv_timer_t sweep_timer; /* closes connections past their deadline */
    conn *conns;            /* every open connection */
    size_t nconns;
    int port; /* the bound port (useful with PORT=0) */
    int draining;
    void (*on_drained)(struct server *srv); /* called once every connection is closed */
} server;

/* Binds and listens on HOST:PORT. Returns 0 or a negative libuv error. */
int server_start(server *srv, struct app *app);
/* Stops accepting; closes idle connections and lets busy ones finish their request, for at
 * most SHUTDOWN_TIMEOUT_MS; then on_drained runs. */
void server_drain(server *srv);

/* Connection plumbing used by the HTTP layer. */
void server_conn_timer(conn *c, uint64_t ms); /* sets the connection's one deadline */
void server_conn_timer_stop(conn *c);
void server_conn_flush(conn *c); /* writes queued responses; closes when asked and done */
void server_conn_close(conn *c);
void server_conn_reading(conn *c); /* starts or stops reading to match the connection state */
/* Serves a connected stream socket the way an accepted one is served (the fuzz targets hand it
 * one end of a socketpair). The server owns the connection and closes fd with it; on NULL
 * the caller still owns fd. */
conn *server_conn_open_fd(server *srv, uv_os_sock_t fd);

#endif
