/* buf: a growable byte buffer, the one owner of its memory. */
#ifndef ENTITYD_BUF_H
#define ENTITYD_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

typedef struct buf {
    char *data; /* NUL-terminated when len > 0 or after buf_cstr() */
    size_t len;
    size_t cap;
} buf;

#define BUF_INIT                                                                                   \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/* Ensures room for `extra` more bytes plus a NUL. Returns 0, or -1 on allocation failure. */
int buf_reserve(buf *b, size_t extra);
/* Appends bytes; the buffer stays NUL-terminated. Returns 0 or -1. */
int buf_append_slow(buf *b, const void *data, size_t len);
/* The common case (room already there) inline: responses and log lines are many small appends. */
static inline int buf_append(buf *b, const void *data, size_t len)
{
    if (b->cap - b->len > len) {
        if (len)
            memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = '\0';
        return 0;
    }
    return buf_append_slow(b, data, len);
}
static inline int buf_append_str(buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}
/* Appends the decimal form of v. */
int buf_append_uint(buf *b, unsigned long long v);
/* Room for any long long in decimal, its sign and a NUL. */
#define BUF_INT_SIZE 24
/* Writes the decimal form of v and a NUL into out, as snprintf's "%lld" does, without its cost
 * (times and limits go to Redis as text on every write). Returns the length. */
size_t buf_format_int(char out[BUF_INT_SIZE], long long v);
int buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends `s` escaped as the inside of a JSON string (no quotes added). */
int buf_append_json_escaped(buf *b, const char *s, size_t len);
/* Drops the first n bytes. */
void buf_consume(buf *b, size_t n);
/* Empties the buffer; frees its memory when it grew beyond `keep` bytes. */
void buf_reset(buf *b, size_t keep);
void buf_free(buf *b);
/* Always a valid C string, "" for an empty buffer. */
const char *buf_cstr(const buf *b);

#endif
