/* log: JSON log lines on stdout. Lines are batched so a busy loop does one write() per batch. */
#include "log.h"

#include <errno.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "isotime.h"

static int min_level = LOG_INFO;
static buf out = BUF_INIT;
static const char *const names[] = {"debug", "info", "warn", "error"};
static int line_level;

#define FLUSH_AT (32 * 1024)

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
    if (line_level >= LOG_WARN || line->len >= FLUSH_AT)
        log_flush();
}

void log_flush(void)
{
    size_t off = 0;
    while (off < out.len) {
        ssize_t n = write(STDOUT_FILENO, out.data + off, out.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* stdout is gone: drop the batch rather than block the loop */
        off += (size_t)n;
    }
    buf_reset(&out, 256 * 1024);
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
