/* query: percent-decoding of query strings into key/value pairs. */
#include "http/query.h"

#include <string.h>

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decodes into the pool; returns NULL and sets *err on a bad escape. */
static char *decode(arena *pool, const char *s, size_t len, size_t *out_len, int *err)
{
    char *d = arena_alloc(pool, len + 1);
    if (!d) {
        *err = QUERY_ENOMEM;
        return NULL;
    }
    if (!memchr(s, '%', len) && !memchr(s, '+', len)) {
        memcpy(d, s, len); /* the usual case: nothing to decode */
        d[len] = '\0';
        *out_len = len;
        return d;
    }
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '+') {
            d[j++] = ' ';
        } else if (s[i] == '%') {
            int hi = i + 1 < len ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < len ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                *err = QUERY_EENCODING;
                return NULL;
            }
            d[j++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            d[j++] = s[i];
        }
    }
    d[j] = '\0';
    *out_len = j;
    return d;
}

int query_parse(arena *pool, const char *q, size_t len, req_param **out, size_t *n,
                const char **bad_key)
{
    *out = NULL;
    *n = 0;
    *bad_key = NULL;
    if (len == 0)
        return QUERY_OK;
    size_t count = 1;
    for (const char *a = memchr(q, '&', len); a; a = memchr(a + 1, '&', len - (size_t)(a + 1 - q)))
        count++;
    req_param *ps = arena_alloc(pool, count * sizeof *ps);
    if (!ps)
        return QUERY_ENOMEM;
    size_t np = 0;
    const char *end = q + len;
    for (const char *p = q; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if (stop > p) {
            const char *eq = memchr(p, '=', (size_t)(stop - p));
            const char *kend = eq ? eq : stop;
            int err = QUERY_OK;
            req_param par;
            par.key = decode(pool, p, (size_t)(kend - p), &par.key_len, &err);
            if (!par.key)
                return err;
            par.val = eq ? decode(pool, eq + 1, (size_t)(stop - eq - 1), &par.val_len, &err)
                         : arena_strndup(pool, "", 0);
            if (!eq)
                par.val_len = 0;
            if (!par.val) {
                *bad_key = par.key;
                return err ? err : QUERY_ENOMEM;
            }
            for (size_t i = 0; i < np; i++)
                if (ps[i].key_len == par.key_len && !memcmp(ps[i].key, par.key, par.key_len)) {
                    *bad_key = par.key;
                    return QUERY_EREPEATED;
                }
            ps[np++] = par;
        }
        p = stop + 1;
    }
    *out = ps;
    *n = np;
    return QUERY_OK;
}
