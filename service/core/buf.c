/* buf: a growable byte buffer. */
#include "core/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int buf_reserve(buf *b, size_t extra)
{
    if (extra >= SIZE_MAX - b->len)
        return -1;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = cap;
    b->data[b->len] = '\0'; /* a fresh buffer is a valid empty string too */
    return 0;
}

int buf_append_slow(buf *b, const void *data, size_t len)
{
    if (buf_reserve(b, len) != 0)
        return -1;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

/* The decimal digits of v, written backwards from end; returns where they start. */
static char *digits_before(char *end, unsigned long long v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

int buf_append_uint(buf *b, unsigned long long v)
{
    /* Written in place: RESP framing appends two numbers an argument. */
    if (b->cap - b->len <= BUF_INT_SIZE && buf_reserve(b, BUF_INT_SIZE) != 0)
        return -1;
    char *d = b->data + b->len;
    size_t n;
    /* Lengths in RESP framing and headers are mostly under 1000: no division loop for them. */
    if (v < 10) {
        d[0] = (char)('0' + v);
        n = 1;
    } else if (v < 100) {
        d[0] = (char)('0' + v / 10);
        d[1] = (char)('0' + v % 10);
        n = 2;
    } else if (v < 1000) {
        d[0] = (char)('0' + v / 100);
        d[1] = (char)('0' + v / 10 % 10);
        d[2] = (char)('0' + v % 10);
        n = 3;
    } else {
        char tmp[BUF_INT_SIZE];
        char *start = digits_before(tmp + sizeof tmp, v);
        n = (size_t)(tmp + sizeof tmp - start);
        memcpy(d, start, n);
    }
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

size_t buf_format_int(char out[BUF_INT_SIZE], long long v)
{
    char tmp[BUF_INT_SIZE];
    /* the magnitude in unsigned arithmetic: -LLONG_MIN does not fit a long long */
    unsigned long long m = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
    char *start = digits_before(tmp + sizeof tmp, m);
    if (v < 0)
        *--start = '-';
    size_t n = (size_t)(tmp + sizeof tmp - start);
    memcpy(out, start, n);
    out[n] = '\0';
    return n;
}

int buf_printf(buf *b, const char *fmt, ...)
{
    /* Format straight into the room left: one pass when the text fits, as it mostly does; a
     * second only after growing the buffer to the length the first one reported. */
    if (buf_reserve(b, 0) != 0)
        return -1;
    size_t room = b->cap - b->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->data + b->len, room, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= room) {
        if (buf_reserve(b, (size_t)n) != 0) {
            b->data[b->len] = '\0';
            return -1;
        }
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (n < 0) {
        b->data[b->len] = '\0';
        return -1;
    }
    b->len += (size_t)n;
    return 0;
}

/* Bytes a JSON string holds as they are: all but control characters, DEL, the quote and the
 * backslash. One look-up a byte: titles and texts are escaped on every write. */
static const char json_plain[257] = "0000000000000000" /* 00 */
                                    "0000000000000000" /* 10 */
                                    "1101111111111111" /* 20 */
                                    "1111111111111111" /* 30 */
                                    "1111111111111111" /* 40 */
                                    "1111111111110111" /* 50 */
                                    "1111111111111111" /* 60 */
                                    "1111111111111110" /* 70 */
                                    "1111111111111111" /* 80 */
                                    "1111111111111111" /* 90 */
                                    "1111111111111111" /* a0 */
                                    "1111111111111111" /* b0 */
                                    "1111111111111111" /* c0 */
                                    "1111111111111111" /* d0 */
                                    "1111111111111111" /* e0 */
                                    "1111111111111111" /* f0 */;

int buf_append_json_escaped(buf *b, const char *s, size_t len)
{
    static const char hexd[] = "0123456789abcdef";
    size_t run = 0; /* bytes copied as they are since the last escape */
    if (buf_reserve(b, len) != 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (json_plain[c] == '1')
            continue;
        if (buf_append(b, s + run, i - run) != 0)
            return -1;
        run = i + 1;
        char esc[6] = {'\\', (char)c, 0, 0, 0, 0};
        size_t n = 2;
        if (c == '\n') {
            esc[1] = 'n';
        } else if (c == '\t') {
            esc[1] = 't';
        } else if (c < 0x20 || c == 0x7f) {
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hexd[c >> 4];
            esc[5] = hexd[c & 15];
            n = 6;
        }
        if (buf_append(b, esc, n) != 0)
            return -1;
    }
    return buf_append(b, s + run, len - run);
}

void buf_consume(buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        if (b->data)
            b->data[0] = '\0';
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

void buf_reset(buf *b, size_t keep)
{
    if (b->cap > keep) {
        buf_free(b);
        return;
    }
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void buf_free(buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

const char *buf_cstr(const buf *b)
{
    return b->data ? b->data : "";
}
