/* server: the listening socket, the set of client connections, and the drain on shutdown. */
#include "net/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/filter.h>
#include <unistd.h>

#include "core/log.h"
#include "core/metrics.h"

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

static int parse_addr(const char *host, int port, struct sockaddr_storage *addr)
{
    int rc = uv_ip4_addr(host, port, (struct sockaddr_in *)addr);
    if (rc != 0)
        rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)addr);
    return rc;
}

static int port_of(const struct sockaddr_storage *a)
{
    return ntohs(a->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)a)->sin6_port
                                          : ((const struct sockaddr_in *)a)->sin_port);
}

/* A socket bound with SO_REUSEPORT (and SO_REUSEADDR, as libuv sets). Returns the fd or a
 * negative errno. */
static int bind_shared(const struct sockaddr_storage *addr)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int on = 1;
    socklen_t len =
        addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0 ||
        bind(fd, (const struct sockaddr *)addr, len) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

int server_reserve_port(const char *host, int port, int *fd, int *bound)
{
    struct sockaddr_storage addr, got;
    if (parse_addr(host, port, &addr) != 0)
        return -EINVAL;
    int s = bind_shared(&addr);
    if (s < 0)
        return s;
    socklen_t len = sizeof got;
    if (getsockname(s, (struct sockaddr *)&got, &len) != 0) {
        int e = -errno;
        close(s);
        return e;
    }
    *fd = s;
    *bound = port_of(&got);
    return 0;
}

int server_start(server *srv, uv_loop_t *loop, const server_options *o)
{
    srv->loop = loop;
    srv->shutdown_timeout_ms = o->shutdown_timeout_ms;
    conn_set_init(&srv->conns, loop, o->proto, &o->limits, o->proto_ctx);
    metrics_register(conn_set_render_metrics, &srv->conns);
    uv_tcp_init(loop, &srv->listener);
    uv_timer_init(loop, &srv->drain_timer);
    srv->listener.data = srv->drain_timer.data = srv;
    struct sockaddr_storage addr;
    int rc = parse_addr(o->host, o->port, &addr);
    if (rc != 0)
        return rc;
    if (o->reuseport) {
        int fd = bind_shared(&addr);
        rc = fd < 0 ? uv_translate_sys_error(-fd) : uv_tcp_open(&srv->listener, fd);
        if (fd >= 0 && rc != 0)
            close(fd);
    } else {
        rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0);
    }
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
    if (rc != 0)
        return rc;
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &blen);
    srv->port = port_of(&bound);
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

/* Makes the listener drop every packet it would take: a socket filter that keeps nothing. A
 * SYN is then unanswered (the client sends it again about a second later and is refused,
 * the listener closed by then: a gateway retries a refused connection elsewhere, nothing
 * was sent), and no handshake completes into the queue. Without it, one completing between
 * the last accept and the close (a preempted loop makes that milliseconds) is reset with
 * its request sent, which a gateway may not retry. */
static void listener_take_no_more(uv_tcp_t *listener)
{
    uv_os_fd_t fd;
    struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
    struct sock_fprog prog = {.len = 1, .filter = &drop};
    if (uv_fileno((uv_handle_t *)listener, &fd) == 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
}

void server_drain(server *srv)
{
    if (srv->draining)
        return;
    srv->draining = 1;
    /* Connections the kernel completed and queued have their requests sent already: closing
     * the listener would reset them. Served first, then no more come (refused: a gateway
     * retries a refused connection elsewhere, as nothing was sent). */
    listener_take_no_more(&srv->listener);
    conn_accept_waiting(&srv->conns, &srv->listener);
    uv_close((uv_handle_t *)&srv->listener, NULL);
    uv_timer_start(&srv->drain_timer, on_drain_timeout, srv->shutdown_timeout_ms, 0);
    /* Every connection closes after its next answer; those still idle after the grace are
     * reset (conn.h). */
    srv->conns.on_empty = on_conns_empty;
    conn_set_drain(&srv->conns);
}

void server_close(server *srv)
{
    if (!srv->loop)
        return; /* stopped before it listened */
    conn_set_stop(&srv->conns);
    if (!uv_is_closing((uv_handle_t *)&srv->drain_timer))
        uv_close((uv_handle_t *)&srv->drain_timer, NULL);
}
