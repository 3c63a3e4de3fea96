/* app: the process-wide state every module reaches through a request. */
#ifndef ENTITYD_APP_H
#define ENTITYD_APP_H

#include <stdbool.h>
#include <uv.h>

#include "core/config.h"

struct server;
struct store;
struct group;
struct auth;
struct pagecache;
struct readcache;
struct findcache;
struct tracking;
struct limits;
struct attester;
struct erasure;
struct sweeper;
struct joinsweep;
struct joinread;
struct webhooks;
struct watch;
struct streams;

typedef struct app {
    uv_loop_t *loop;
    config cfg;
    struct server *server;
    struct store *store;
    struct group *groups; /* script calls sent together per loop turn (awards, removals) */
    struct auth *auth;
    struct pagecache *pages;     /* NULL when PAGE_CACHE_SIZE is 0 */
    struct readcache *reads;     /* NULL when READ_CACHE_MB is 0 */
    struct findcache *finds;     /* NULL when FIND_CACHE_MB or READ_CACHE_MB is 0 */
    struct tracking *tracking;   /* the read cache's invalidations; NULL without the cache */
    struct limits *limits;       /* write-budget leases; NULL: each write charges its own unit */
    struct attester *attester;   /* level attestations' signer; NULL: attestations are off */
    struct erasure *erasure;     /* the background erasure of deleted entities */
    struct sweeper *sweeper;     /* removed members' board entries, taken off in the background */
    struct joinsweep *joinsweep; /* the re-check of rules members (jobs/joinsweep.h) */
    struct joinread *joinread;   /* join rules' chain reads (rpc/joinread.h) */
    struct webhooks *webhooks;   /* webhook deliveries (push/webhook.h) */
    struct watch *watch;         /* which entities' events may have grown (push/watch.h) */
    struct streams *streams;     /* the open event streams (push/streams.h) */
} app;

#endif
