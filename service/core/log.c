/* log: JSON log lines on stdout. Lines are batched so a busy loop does one write() per batch,
 * and a stdout nobody reads (a stalled pipe, a stopped terminal) never stops the loop: bytes it
 * does not take wait in `out`, up to the bound, and lines past the bound are dropped. */
#include "core/log.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/isotime.h"

static int min_level = LOG_INFO;
static buf out = BUF_INIT;
static const char *const names[] = {"debug", "info", "warn", "error"};
static int line_level;
static size_t line_start; /* where the line being built began in `out` */
static size_t sent;       /* bytes of `out` already written */
static size_t bound = 1 << 20;
static int out_fd = STDOUT_FILENO;
static int fd_kind = -1; /* -1 not looked at yet, 1 a regular file, 0 anything else */
static uint64_t dropped;
static uv_poll_t watch;
static bool watch_ok, watching;

#define FLUSH_AT (32 * 1024)
#define KEEP     (256 * 1024)

int log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

void log_set_level(int level)
{
    min_level = level;
}

int log_enabled(int level)
{
    return level >= min_level;
}

/* The time is formatted once per millisecond: a busy loop logs many lines in each. */
static void append_time(buf *b)
{
    static int64_t last_ms = -1;
    static char ts[ISOTIME_STRING_SIZE];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    int64_t ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    if (ms != last_ms) {
        isotime_format(ms, ts);
        last_ms = ms;
    }
    buf_append(b, ts, ISOTIME_STRING_SIZE - 1);
}

static void append_key(buf *b, const char *key)
{
    buf_append(b, ",\"", 2);
    buf_append_str(b, key);
    buf_append(b, "\":", 2);
}

static void append_int(buf *b, int64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--i] = '-';
    buf_append(b, tmp + i, sizeof tmp - i);
}

buf *log_begin(int level, const char *msg)
{
    if (level < min_level)
        return NULL;
    line_level = level;
    line_start = out.len;
    buf_append_str(&out, "{\"time\":\"");
    append_time(&out);
    buf_append_str(&out, "\",\"level\":\"");
    buf_append_str(&out, names[level]);
    buf_append(&out, "\"", 1);
    log_str(&out, "msg", msg);
    return &out;
}

void log_strn(buf *line, const char *key, const char *value, size_t len)
{
    append_key(line, key);
    buf_append(line, "\"", 1);
    buf_append_json_escaped(line, value, len);
    buf_append(line, "\"", 1);
}

void log_str_safe(buf *line, const char *key, const char *value)
{
    if (!value) {
        log_str(line, key, NULL);
        return;
    }
    append_key(line, key);
    buf_append(line, "\"", 1);
    buf_append_str(line, value);
    buf_append(line, "\"", 1);
}

void log_str(buf *line, const char *key, const char *value)
{
    if (!value) {
        append_key(line, key);
        buf_append(line, "null", 4);
        return;
    }
    log_strn(line, key, value, strlen(value));
}

void log_int(buf *line, const char *key, int64_t value)
{
    append_key(line, key);
    append_int(line, value);
}

void log_double(buf *line, const char *key, double value)
{
    /* Three decimals, enough for milliseconds with microsecond detail. */
    append_key(line, key);
    if (value < 0 || value > 1e15) {
        buf_printf(line, "%.3f", value);
        return;
    }
    int64_t thousandths = (int64_t)(value * 1000 + 0.5);
    append_int(line, thousandths / 1000);
    char frac[5] = {'.', (char)('0' + thousandths / 100 % 10), (char)('0' + thousandths / 10 % 10),
                    (char)('0' + thousandths % 10), 0};
    buf_append(line, frac, 4);
}

void log_end(buf *line)
{
    buf_append(line, "}\n", 2);
    if (out.len - sent > bound) {
        /* The line goes whole; the ones before it stay queued. */
        out.len = line_start;
        if (out.data)
            out.data[out.len] = '\0';
        dropped++;
        return;
    }
    /* Batches stay under half the bound, so only a stalled fd ever fills it. */
    size_t batch = bound / 2 < FLUSH_AT ? bound / 2 : FLUSH_AT;
    if (!watching && (line_level >= LOG_WARN || out.len - sent >= batch))
        log_flush();
}

static void classify(void)
{
    struct stat sb;
    fd_kind = fstat(out_fd, &sb) == 0 && S_ISREG(sb.st_mode) ? 1 : 0;
}

/* Writes from `sent` on as long as the fd takes bytes without blocking. A regular file always
 * does. Anything else (a pipe, a socket, a terminal) may be a blocking fd shared with other
 * processes, so its flags are left alone: a write goes only where poll() reports room, and is
 * at most PIPE_BUF bytes, which a pipe reported writable takes whole.
 * Returns 0 when all is written, 1 when the fd would block, -1 when it refuses (closed). */
static int write_some(void)
{
    if (fd_kind < 0)
        classify();
    while (sent < out.len) {
        size_t n = out.len - sent;
        if (fd_kind == 0) {
            struct pollfd p = {.fd = out_fd, .events = POLLOUT};
            int r = poll(&p, 1, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0 || (p.revents & POLLNVAL))
                return -1;
            if (r == 0)
                return 1;
            if (n > PIPE_BUF) {
                /* Whole lines where they fit: workers share stdout, and a pipe keeps a write of
                 * at most PIPE_BUF bytes apart from theirs, so no line is cut by another's. */
                size_t cut = PIPE_BUF;
                while (cut > 0 && out.data[sent + cut - 1] != '\n')
                    cut--;
                n = cut ? cut : PIPE_BUF;
            }
        }
        ssize_t w = write(out_fd, out.data + sent, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 1;
        if (w <= 0)
            return -1;
        sent += (size_t)w;
    }
    return 0;
}

/* Forgets what waits, counting its lines as dropped (a partly written one included). */
static void drop_pending(void)
{
    const char *p = out.data ? out.data + sent : NULL, *end = p ? out.data + out.len : NULL;
    while (p && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        dropped++;
        p++;
    }
    sent = out.len;
}

static void on_writable(uv_poll_t *h, int status, int events)
{
    (void)status, (void)events;
    uv_poll_stop(h);
    watching = false;
    log_flush();
}

void log_flush(void)
{
    if (watching)
        return; /* the fd is known to be full: its watch flushes */
    if (write_some() < 0)
        drop_pending(); /* stdout is gone: drop rather than keep growing */
    if (sent == out.len) {
        buf_reset(&out, KEEP);
        sent = line_start = 0;
        return;
    }
    if (sent >= out.len / 2) {
        buf_consume(&out, sent);
        sent = 0;
    }
    if (watch_ok && uv_poll_start(&watch, UV_WRITABLE, on_writable) == 0)
        watching = true;
}

void log_init(uv_loop_t *loop, int fd, size_t bound_bytes)
{
    log_flush(); /* what was logged before goes where it was meant to */
    out_fd = fd;
    bound = bound_bytes;
    classify();
    /* A regular file never blocks; a descriptor epoll refuses (/dev/null) is left to the timer. */
    watch_ok = loop && fd_kind == 0 && uv_poll_init(loop, &watch, fd) == 0;
}

void log_close(void)
{
    if (!watch_ok)
        return;
    watch_ok = watching = false;
    uv_close((uv_handle_t *)&watch, NULL);
}

void log_finish(int timeout_ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int r = write_some();
        if (r <= 0)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long long left =
            timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000LL + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            break;
        struct pollfd p = {.fd = out_fd, .events = POLLOUT};
        poll(&p, 1, (int)left);
    }
    drop_pending();
    buf_free(&out);
    sent = line_start = 0;
}

uint64_t log_dropped_lines(void)
{
    return dropped;
}

size_t log_pending_bytes(void)
{
    return out.len - sent;
}

void log_event(int level, const char *msg, const char *detail)
{
    buf *l = log_begin(level, msg);
    if (!l)
        return;
    if (detail)
        log_str(l, "detail", detail);
    log_end(l);
}
