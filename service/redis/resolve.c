/* resolve: see resolve.h. */
#include "redis/resolve.h"

#include <arpa/inet.h>
#include <netdb.h>
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
