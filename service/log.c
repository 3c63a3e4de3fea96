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

buf *log_begin(int level, const char *msg)
{
    if (level < min_level)
        return NULL;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char ts[32];
    isotime_format((int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000, ts);
    line_level = level;
    buf_printf(&out, "{\"time\":\"%s\",\"level\":\"%s\"", ts, names[level]);
    log_str(&out, "msg", msg);
    return &out;
}

void log_strn(buf *line, const char *key, const char *value, size_t len)
{
    buf_printf(line, ",\"%s\":\"", key);
    buf_append_json_escaped(line, value, len);
    buf_append(line, "\"", 1);
}

void log_str(buf *line, const char *key, const char *value)
{
    if (!value) {
        buf_printf(line, ",\"%s\":null", key);
        return;
    }
    log_strn(line, key, value, strlen(value));
}

void log_int(buf *line, const char *key, int64_t value)
{
    buf_printf(line, ",\"%s\":%lld", key, (long long)value);
}

void log_double(buf *line, const char *key, double value)
{
    buf_printf(line, ",\"%s\":%.3f", key, value);
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
