/* router: path normalization and matching against the route table. */
#include "api/router.h"

#include <llhttp.h>
#include <stdbool.h>
#include <string.h>

size_t router_normalize(char *path, size_t len)
{
    /* Most paths need nothing: no "//" anywhere and no trailing slash. */
    bool clean = len <= 1 || path[len - 1] != '/';
    for (size_t i = 1; clean && i < len; i++)
        clean = !(path[i] == '/' && path[i - 1] == '/');
    if (clean) {
        path[len] = '\0';
        return len;
    }
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        if (path[i] == '/' && j > 0 && path[j - 1] == '/')
            continue;
        path[j++] = path[i];
    }
    if (j > 1 && path[j - 1] == '/')
        j--;
    path[j] = '\0';
    return j;
}

/* Walks pattern and path byte by byte, a parameter ("{name}", always a whole segment) taking
 * the path up to its next '/': most routes differ from the path within a few bytes, which a
 * walk by segments (finding each segment's end in both first) paid for in full. */
static bool match_one(const char *pat, const char *path, size_t len, slice *params, size_t *np)
{
    size_t n = 0;
    const char *p = path, *end = path + len;
    while (*pat) {
        if (*pat == '{') {
            const char *seg_end = memchr(p, '/', (size_t)(end - p));
            size_t slen = seg_end ? (size_t)(seg_end - p) : (size_t)(end - p);
            if (slen == 0 || n >= REQ_MAX_PATH_PARAMS)
                return false;
            params[n].s = p;
            params[n].len = slen;
            n++;
            p += slen;
            while (*pat && *pat != '/')
                pat++;
            continue;
        }
        if (p == end || *p != *pat)
            return false;
        p++;
        pat++;
    }
    if (p != end)
        return false;
    *np = n;
    return true;
}

/* True when the comma-separated list already names the method (whole tokens only). */
static bool allow_has(const char *allow, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = allow; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && !memcmp(p, name, n))
            return true;
        if (!comma)
            break;
        p = comma + 2;
    }
    return false;
}

int router_match(const route *table, size_t n, int method, const char *path, size_t len,
                 const route **out, slice *params, size_t *nparams, char *allow, size_t allow_len)
{
    bool path_known = false;
    size_t alen = 0;
    if (allow_len)
        allow[0] = '\0';
    /* The routes of the request's method first; the others only to say what is allowed. */
    for (size_t i = 0; i < n; i++) {
        slice tmp[REQ_MAX_PATH_PARAMS];
        size_t np = 0;
        if (table[i].method != method || !match_one(table[i].pattern, path, len, tmp, &np))
            continue;
        memcpy(params, tmp, np * sizeof *tmp);
        *nparams = np;
        *out = &table[i];
        return ROUTER_FOUND;
    }
    for (size_t i = 0; i < n; i++) {
        slice tmp[REQ_MAX_PATH_PARAMS];
        size_t np = 0;
        if (!match_one(table[i].pattern, path, len, tmp, &np))
            continue;
        path_known = true;
        const char *name = llhttp_method_name((llhttp_method_t)table[i].method);
        if (allow_len && !allow_has(allow, name)) {
            size_t need = strlen(name) + (alen ? 2 : 0);
            if (alen + need + 1 <= allow_len) {
                if (alen) {
                    memcpy(allow + alen, ", ", 2);
                    alen += 2;
                }
                memcpy(allow + alen, name, strlen(name) + 1);
                alen += strlen(name);
            }
        }
    }
    return path_known ? ROUTER_METHOD_NOT_ALLOWED : ROUTER_NOT_FOUND;
}
