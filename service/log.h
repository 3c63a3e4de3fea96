/* log: JSON log lines on stdout, one object per line, batched between flushes. */
#ifndef ENTITYD_LOG_H
#define ENTITYD_LOG_H

#include <stddef.h>
#include <stdint.h>

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

/* Writes what is batched. Called by a timer, before exit, and at once for warnings and errors. */
void log_flush(void);

/* One-call form for simple events: a message and an optional detail string. */
void log_event(int level, const char *msg, const char *detail);

#endif
