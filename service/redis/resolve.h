/* resolve: a host name to a numeric address on the libuv threadpool.
 *
 * redisAsyncConnect resolves its host with a blocking getaddrinfo on the calling thread, the
 * loop. Given a numeric address instead, glibc answers from the string alone (no hosts file,
 * no DNS), so the lookup is done here first, off the loop, and hiredis gets the result. */
#ifndef ENTITYD_RESOLVE_H
#define ENTITYD_RESOLVE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* status: 0 with `numeric` the address (valid during the call only), or a libuv error
 * (UV_EAI_CANCELED after resolve_cancel, UV_EAI_NONAME for an unknown host, ...). */
typedef void (*resolve_cb)(void *data, int status, const char *numeric);

/* One resolution at a time; embedded in its owner, which must outlive the loop's last run
 * (a resolution under way on the threadpool cannot be stopped: its callback still comes). */
typedef struct resolver {
    uv_getaddrinfo_t req;
    resolve_cb cb;
    void *data;
    bool busy;
    char numeric[INET6_ADDRSTRLEN];
} resolver;

/* Resolves host; cb runs exactly once, on the loop. A numeric host (IPv4, or IPv6 without
 * brackets) is answered before this returns, as is a failure to start. IPv4 addresses are
 * preferred over IPv6 ones, as hiredis itself does. */
void resolve_start(resolver *r, uv_loop_t *loop, const char *host, resolve_cb cb, void *data);
/* Cancels a resolution still waiting for a pool thread (cb then gets UV_EAI_CANCELED); one
 * already running finishes and calls back with its result. */
void resolve_cancel(resolver *r);
/* A resolution has started and not called back yet. */
bool resolve_busy(const resolver *r);

/* One "host:port" of a configured list (REDIS_CLUSTER_NODES, REDIS_SENTINELS). */
#define RESOLVE_HOST_SIZE 256
typedef struct resolve_endpoint {
    char host[RESOLVE_HOST_SIZE]; /* an [IPv6] host without its brackets */
    int port;
} resolve_endpoint;

/* Parses "host:port[,host:port...]" into out, at most max. Returns the count (at least 1), -1
 * when the list is empty or an item is malformed, -2 when it holds more than max. */
int resolve_parse_list(const char *list, resolve_endpoint *out, int max);

/* A REDIS_URL: redis://[[user]:password@]host[:port][/db], the host maybe an [IPv6] one. */
typedef struct resolve_url {
    char host[RESOLVE_HOST_SIZE];
    int port; /* 6379 when not given */
    char user[128], password[256];
    int db;
} resolve_url;

/* Parses a REDIS_URL into out. Returns 0, or -1 with a sentence in err. */
int resolve_parse_url(const char *url, resolve_url *out, char *err, size_t err_len);

#endif
