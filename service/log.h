/* log: JSON log lines on stdout, one object per line, batched between flushes. Writing never
 * blocks the loop: what stdout does not take at once waits in a bounded buffer (written when
 * stdout is writable again); a line that would overflow it is dropped and counted. */
#ifndef ENTITYD_LOG_H
#define ENTITYD_LOG_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Parses "debug"|"info"|"warn"|"error"; returns -1 for anything else. */
int log_level_parse(const char *s);
void log_set_level(int level);
int log_enabled(int level);

/* Starts a line with time, level and msg; returns NULL when the level is filtered out. The
 * returned buffer belongs to the logger: add fields, then log_end(). Loop thread only. */
buf *log_begin(int level, const char *msg);
void log_str(buf *line, const char *key, const char *value);
void log_strn(buf *line, const char *key, const char *value, size_t len);
/* For values that need no JSON escaping (ids, route templates, addresses): no scan. */
void log_str_safe(buf *line, const char *key, const char *value);
void log_int(buf *line, const char *key, int64_t value);
void log_double(buf *line, const char *key, double value);
void log_end(buf *line);

/* Where lines go and how many bytes may wait there: fd (stdout in the service), `bound` bytes
 * (LOG_BUFFER_BYTES). With a loop, a stalled fd is watched for writability; without one (tests),
 * or where the fd cannot be watched, the next flush (the 200 ms timer) retries. Lines logged
 * before this go to fd 1 with a 1 MiB bound. */
void log_init(uv_loop_t *loop, int fd, size_t bound);
/* Writes what is batched, as far as the fd takes it now. Called by a timer, and at once for
 * warnings and errors. */
void log_flush(void);
/* Closes the writability watch (its handle is on the loop). Lines keep being buffered. */
void log_close(void);
/* Before exit, after the loop: writes what waits, waiting at most timeout_ms in all for a
 * stalled fd; what is still left then is dropped (and counted). */
void log_finish(int timeout_ms);
/* Lines dropped so far: the buffer was full, or the fd refused them (closed). */
uint64_t log_dropped_lines(void);
/* Bytes waiting to be written. */
size_t log_pending_bytes(void);

/* One-call form for simple events: a message and an optional detail string. */
void log_event(int level, const char *msg, const char *detail);

#endif
