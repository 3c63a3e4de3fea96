/* server: the listening socket, the set of client connections, and the drain on shutdown. */
#include "server.h"

#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "http.h"
#include "log.h"

static void drained(server *srv)
{
    uv_timer_stop(&srv->drain_timer);
    if (srv->on_drained) {
        void (*cb)(server *) = srv->on_drained;
        srv->on_drained = NULL;
        cb(srv);
    }
}

static void on_conns_empty(conn_set *set)
{
    drained((server *)((char *)set - offsetof(server, conns)));
}

static void on_connection(uv_stream_t *listener, int status)
{
    server *srv = listener->data;
    if (status < 0) {
        log_event(LOG_WARN, "accept failed", uv_strerror(status));
        return;
    }
    conn_accept(&srv->conns, listener);
}

int server_start(server *srv, app *a)
{
    srv->app = a;
    conn_limits limits = {
        .header_timeout_ms = (uint64_t)a->cfg.header_timeout_ms,
        .idle_timeout_ms = (uint64_t)a->cfg.idle_timeout_ms,
        .write_timeout_ms = (uint64_t)a->cfg.write_timeout_ms,
        .write_buffer_bytes = (size_t)a->cfg.write_buffer_bytes,
        .max_connections = (size_t)a->cfg.max_connections,
    };
    conn_set_init(&srv->conns, a->loop, &http_protocol, &limits, a);
    uv_tcp_init(a->loop, &srv->listener);
    uv_timer_init(a->loop, &srv->drain_timer);
    srv->listener.data = srv->drain_timer.data = srv;
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(a->cfg.host, (int)a->cfg.port, (struct sockaddr_in *)&addr);
    if (rc != 0)
        rc = uv_ip6_addr(a->cfg.host, (int)a->cfg.port, (struct sockaddr_in6 *)&addr);
    if (rc != 0)
        return rc;
    rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
    if (rc != 0)
        return rc;
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &blen);
    srv->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);
    return 0;
}

static void on_drain_timeout(uv_timer_t *t)
{
    server *srv = t->data;
    log_event(LOG_WARN, "shutdown timeout: closing connections with requests in flight", NULL);
    /* Answers still owed are failed by the store as it closes; their memory goes then. */
    conn_set_close_all(&srv->conns);
    srv->conns.on_empty = NULL;
    drained(srv);
}

void server_drain(server *srv)
{
    if (srv->draining)
        return;
    srv->draining = 1;
    uv_close((uv_handle_t *)&srv->listener, NULL);
    uv_timer_start(&srv->drain_timer, on_drain_timeout, (uint64_t)srv->app->cfg.shutdown_timeout_ms,
                   0);
    /* Idle connections go now; the others close after their current answer. */
    srv->conns.on_empty = on_conns_empty;
    conn_set_drain(&srv->conns);
}

void server_close(server *srv)
{
    conn_set_stop(&srv->conns);
    if (!uv_is_closing((uv_handle_t *)&srv->drain_timer))
        uv_close((uv_handle_t *)&srv->drain_timer, NULL);
}
