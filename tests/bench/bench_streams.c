/* entityd-bench-streams: holds N event streams (GET /api/entities/{id}/events/stream) open on
 * one entityd and measures how long each event takes to reach every stream: the time between
 * the event's id (the Redis stream id: its first part is the ms Redis wrote it) and the moment
 * its "id:" line is read here, per stream and event. Client and server share the host's clock.
 *
 * usage: entityd-bench-streams HOST PORT PATH TOKEN N EVENTS TIMEOUT_S
 *   Opens N streams with "Authorization: Bearer TOKEN", prints "ready <n>" once all answered
 *   200 (then the caller writes events), and ends when every stream saw EVENTS events or after
 *   TIMEOUT_S seconds past ready; prints "streams <open> events <seen of N*EVENTS> p50_ms <x>
 *   p99_ms <x> max_ms <x> closed <n>". With EVENTS 0 it holds the streams idle until SIGTERM or
 *   TIMEOUT_S (for a load run beside them). A stream answered 503 (the instance shedding load
 *   while thousands open at once) is opened again a second later, at most 30 times. Loopback
 *   only; the caller raises the fd limit. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <uv.h>

typedef struct stream {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    char line[512];
    size_t line_len;
    bool ready, closed, again;
    int events, tries;
} stream;

static struct {
    uv_loop_t *loop;
    struct sockaddr_in addr;
    char *request;
    size_t request_len;
    int n, events, timeout_s, ready, closed, done_streams;
    stream *streams;
    double *lat;
    size_t nlat, cap_lat;
    uv_timer_t timer, retry;
    int *retry_list, nretry;
    uv_signal_t sigterm;
    bool started;
} g;

static double now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec * 1000.0 + (double)tv.tv_usec / 1000.0;
}

static void finish(void);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    static char shared[65536];
    (void)suggested;
    *b = uv_buf_init(shared, sizeof shared);
}

static void on_closed(uv_handle_t *h)
{
    stream *s = (stream *)h;
    if (s->again)
        g.retry_list[g.nretry++] = (int)(s - g.streams);
}

static void stream_close(stream *s)
{
    if (s->closed)
        return;
    s->closed = true;
    if (!s->again)
        g.closed++;
    uv_close((uv_handle_t *)&s->tcp, on_closed);
}

static void on_connect(uv_connect_t *c, int status);

static void stream_open(stream *s)
{
    s->closed = s->again = false;
    s->line_len = 0;
    uv_tcp_init(g.loop, &s->tcp);
    s->connect.data = s;
    uv_tcp_connect(&s->connect, &s->tcp, (const struct sockaddr *)&g.addr, on_connect);
}

static void reopen(uv_timer_t *t)
{
    for (int i = 0; i < g.nretry; i++)
        stream_open(&g.streams[g.retry_list[i]]);
    g.nretry = 0;
    uv_timer_start(t, reopen, 1000, 0);
}

static void on_line(stream *s)
{
    if (!s->ready) {
        if (!strncmp(s->line, "HTTP/1.1 ", 9)) {
            if (!strncmp(s->line + 9, "503", 3) && ++s->tries <= 30) {
                s->again = true;
                stream_close(s);
                return;
            }
            if (strncmp(s->line + 9, "200", 3)) {
                fprintf(stderr, "a stream answered: %s\n", s->line);
                stream_close(s);
                return;
            }
            s->ready = true;
            if (++g.ready == g.n) {
                printf("ready %d\n", g.ready);
                fflush(stdout);
                g.started = true;
                uv_timer_start(&g.timer, (uv_timer_cb)finish, (uint64_t)g.timeout_s * 1000, 0);
            }
        }
        return;
    }
    if (strncmp(s->line, "id: ", 4))
        return;
    double ms = strtod(s->line + 4, NULL), lat = now_ms() - ms;
    if (g.nlat < g.cap_lat)
        g.lat[g.nlat++] = lat;
    if (++s->events == g.events && g.events > 0 && ++g.done_streams == g.n)
        finish();
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    stream *s = (stream *)st;
    if (n < 0) {
        stream_close(s);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        char c = b->base[i];
        if (c == '\n' || s->line_len == sizeof s->line - 1) {
            if (s->line_len && s->line[s->line_len - 1] == '\r')
                s->line_len--;
            s->line[s->line_len] = '\0';
            on_line(s);
            s->line_len = 0;
            if (s->closed)
                return;
            continue;
        }
        s->line[s->line_len++] = c;
    }
}

static void on_written(uv_write_t *w, int status)
{
    stream *s = w->data;
    if (status)
        stream_close(s);
}

static void on_connect(uv_connect_t *c, int status)
{
    stream *s = c->data;
    if (status) {
        fprintf(stderr, "connect: %s\n", uv_strerror(status));
        stream_close(s);
        return;
    }
    uv_buf_t b = uv_buf_init(g.request, (unsigned)g.request_len);
    s->write.data = s;
    uv_write(&s->write, (uv_stream_t *)&s->tcp, &b, 1, on_written);
    uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_read);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void finish(void)
{
    qsort(g.lat, g.nlat, sizeof *g.lat, cmp_double);
    double p50 = g.nlat ? g.lat[g.nlat / 2] : -1,
           p99 = g.nlat ? g.lat[(size_t)((double)(g.nlat - 1) * 0.99)] : -1,
           max = g.nlat ? g.lat[g.nlat - 1] : -1;
    printf("streams %d events %zu of %lld p50_ms %.1f p99_ms %.1f max_ms %.1f closed %d\n",
           g.ready - g.closed, g.nlat, (long long)g.n * g.events, p50, p99, max, g.closed);
    fflush(stdout);
    exit(0);
}

static void on_sigterm(uv_signal_t *h, int sig)
{
    (void)h, (void)sig;
    finish();
}

/* Opens the streams a few hundred at a time, so the listener's backlog is never the limit. */
static void open_some(uv_timer_t *t)
{
    static int next;
    for (int k = 0; k < 200 && next < g.n; k++, next++)
        stream_open(&g.streams[next]);
    if (next < g.n)
        uv_timer_start(t, open_some, 20, 0);
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s HOST PORT PATH TOKEN N EVENTS TIMEOUT_S\n", argv[0]);
        return 2;
    }
    g.n = atoi(argv[5]);
    g.events = atoi(argv[6]);
    g.timeout_s = atoi(argv[7]);
    if (g.n <= 0 || g.events < 0 || g.timeout_s <= 0 ||
        uv_ip4_addr(argv[1], atoi(argv[2]), &g.addr)) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    size_t cap = strlen(argv[3]) + strlen(argv[4]) + 256;
    g.request = malloc(cap);
    g.request_len = (size_t)snprintf(g.request, cap,
                                     "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n"
                                     "Authorization: Bearer %s\r\n\r\n",
                                     argv[3], argv[1], argv[4]);
    g.streams = calloc((size_t)g.n, sizeof *g.streams);
    g.cap_lat = (size_t)g.n * (size_t)(g.events ? g.events : 1);
    g.lat = malloc(g.cap_lat * sizeof *g.lat);
    g.retry_list = malloc((size_t)g.n * sizeof *g.retry_list);
    if (!g.request || !g.streams || !g.lat || !g.retry_list)
        return 1;
    g.loop = uv_default_loop();
    uv_timer_init(g.loop, &g.timer);
    uv_timer_init(g.loop, &g.retry);
    uv_timer_start(&g.retry, reopen, 1000, 0);
    uv_signal_init(g.loop, &g.sigterm);
    uv_signal_start(&g.sigterm, on_sigterm, SIGTERM);
    uv_timer_t opener;
    uv_timer_init(g.loop, &opener);
    uv_timer_start(&opener, open_some, 0, 0);
    /* Bounded even when the streams never all open: the opening gets a minute more. */
    uv_timer_start(&g.timer, (uv_timer_cb)finish, (uint64_t)g.timeout_s * 1000 + 60000, 0);
    return uv_run(g.loop, UV_RUN_DEFAULT);
}
