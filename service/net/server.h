/* server: the listening socket, the set of client connections, and the drain on shutdown. */
#ifndef ENTITYD_SERVER_H
#define ENTITYD_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "net/conn.h"

typedef struct server_options {
    const char *host;
    int port;                   /* 0 picks a free one */
    const conn_protocol *proto; /* what the connections speak */
    void *proto_ctx;            /* handed to the protocol with each connection's set */
    conn_limits limits;
    uint64_t shutdown_timeout_ms; /* how long a drain waits for answers in flight */
    bool reuseport;               /* SO_REUSEPORT: one of several workers on one port */
} server_options;

typedef struct server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t drain_timer;
    conn_set conns; /* every client connection */
    int port;       /* the bound port (useful with port 0) */
    uint64_t shutdown_timeout_ms;
    int draining;
    void (*on_drained)(struct server *srv); /* called once every connection is closed */
} server;

/* For workers sharing a port: binds a socket with SO_REUSEPORT without listening on it, so the
 * port (a free one when port is 0) stays this process's while workers come and go. Sets *fd
 * and *bound. Returns 0 or a negative errno. */
int server_reserve_port(const char *host, int port, int *fd, int *bound);
/* Binds and listens. Returns 0 or a negative libuv error. */
int server_start(server *srv, uv_loop_t *loop, const server_options *o);
/* Stops accepting (after serving the connections already queued); every connection gets its
 * next answer with Connection: close and closes after it, idle ones are reset after the grace
 * (conn_set_drain), for at most shutdown_timeout_ms; then on_drained runs. */
void server_drain(server *srv);
/* Closes the handles the server still holds (after on_drained; nothing if it never started). */
void server_close(server *srv);

#endif
