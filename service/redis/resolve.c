/* resolve: see resolve.h. */
#include "redis/resolve.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static void finish(resolver *r, int status, const char *numeric)
{
    r->busy = false;
    r->cb(r->data, status, numeric);
}

/* The first IPv4 address, else the first IPv6 one, as text. */
static int pick(const struct addrinfo *res, char *out, size_t out_len)
{
    const struct addrinfo *v6 = NULL;
    for (const struct addrinfo *p = res; p; p = p->ai_next) {
        if (p->ai_family == AF_INET)
            return uv_ip4_name((const struct sockaddr_in *)p->ai_addr, out, out_len);
        if (p->ai_family == AF_INET6 && !v6)
            v6 = p;
    }
    if (v6)
        return uv_ip6_name((const struct sockaddr_in6 *)v6->ai_addr, out, out_len);
    return UV_EAI_NONAME;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    resolver *r = req->data;
    if (status == 0)
        status = pick(res, r->numeric, sizeof r->numeric);
    uv_freeaddrinfo(res);
    finish(r, status, status == 0 ? r->numeric : NULL);
}

void resolve_start(resolver *r, uv_loop_t *loop, const char *host, resolve_cb cb, void *data)
{
    r->cb = cb;
    r->data = data;
    r->busy = true;
    unsigned char addr[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1) {
        finish(r, 0, host);
        return;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    r->req.data = r;
    int rc = uv_getaddrinfo(loop, &r->req, on_resolved, host, NULL, &hints);
    if (rc != 0)
        finish(r, rc, NULL);
}

void resolve_cancel(resolver *r)
{
    if (r->busy)
        uv_cancel((uv_req_t *)&r->req);
}

bool resolve_busy(const resolver *r)
{
    return r->busy;
}

int resolve_parse_list(const char *list, resolve_endpoint *out, int max)
{
    int count = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = NULL; /* the last one: an IPv6 host holds some too */
        for (const char *q = p; q < p + len; q++)
            if (*q == ':')
                colon = q;
        const char *host = p;
        size_t hlen = colon ? (size_t)(colon - p) : 0;
        if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']')
            host++, hlen -= 2;
        long port = 0;
        bool digits = colon && colon + 1 < p + len;
        for (const char *q = colon ? colon + 1 : p + len; q < p + len && digits; q++) {
            digits = *q >= '0' && *q <= '9' && port <= 65535;
            port = port * 10 + (*q - '0');
        }
        if (!digits || hlen == 0 || hlen >= RESOLVE_HOST_SIZE || port < 1 || port > 65535)
            return -1;
        if (count == max)
            return -2;
        memcpy(out[count].host, host, hlen);
        out[count].host[hlen] = '\0';
        out[count++].port = (int)port;
        p = end ? end + 1 : p + len;
    }
    return count ? count : -1;
}

int resolve_parse_url(const char *url, resolve_url *out, char *err, size_t err_len)
{
    const char *p = url;
    if (!strncmp(p, "redis://", 8))
        p += 8;
    else {
        snprintf(err, err_len, "REDIS_URL must start with redis://");
        return -1;
    }
    const char *at = strrchr(p, '@');
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        size_t ulen = colon ? (size_t)(colon - p) : 0;
        size_t plen = (size_t)(at - pw);
        if (ulen >= sizeof out->user || plen >= sizeof out->password) {
            snprintf(err, err_len, "REDIS_URL credentials are too long");
            return -1;
        }
        memcpy(out->user, p, ulen);
        out->user[ulen] = '\0';
        memcpy(out->password, pw, plen);
        out->password[plen] = '\0';
        p = at + 1;
    }
    const char *slash = strchr(p, '/');
    size_t hostport = slash ? (size_t)(slash - p) : strlen(p);
    const char *host = p, *colon;
    size_t hlen;
    if (*p == '[') {
        /* An IPv6 address in brackets, as in URLs: [::1]:6379. */
        const char *close = memchr(p, ']', hostport);
        if (!close || (close + 1 != p + hostport && close[1] != ':')) {
            snprintf(err, err_len, "REDIS_URL has a malformed [IPv6] host");
            return -1;
        }
        host = p + 1;
        hlen = (size_t)(close - host);
        colon = close + 1 != p + hostport ? close + 1 : NULL;
    } else {
        colon = memchr(p, ':', hostport);
        hlen = colon ? (size_t)(colon - p) : hostport;
    }
    if (hlen == 0 || hlen >= sizeof out->host) {
        snprintf(err, err_len, "REDIS_URL has no valid host");
        return -1;
    }
    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    out->port = 6379;
    if (colon) {
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (end != p + hostport || port < 1 || port > 65535) {
            snprintf(err, err_len, "REDIS_URL has an invalid port");
            return -1;
        }
        out->port = (int)port;
    }
    out->db = 0;
    if (slash && slash[1]) {
        char *end;
        long db = strtol(slash + 1, &end, 10);
        if (*end || db < 0 || db > 100000) {
            snprintf(err, err_len, "REDIS_URL has an invalid database number");
            return -1;
        }
        out->db = (int)db;
    }
    return 0;
}
