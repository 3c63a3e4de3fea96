/* query: percent-decoding of query strings into key/value pairs. */
#ifndef ENTITYD_QUERY_H
#define ENTITYD_QUERY_H

#include <stddef.h>

#include "core/arena.h"
#include "http/request.h"

enum query_err {
    QUERY_OK = 0,
    QUERY_EENCODING, /* a bad %-escape, or one that decodes to NUL */
    QUERY_EREPEATED, /* a parameter given twice */
    QUERY_ENOMEM,
};

/* Parses "a=1&b=x%20y" into decoded pairs allocated in `pool`. On error `*bad_key` names the
 * offending parameter (decoded, in the pool) when it is known. */
int query_parse(arena *pool, const char *q, size_t len, req_param **out, size_t *n,
                const char **bad_key);

#endif
