/* app: the process-wide state every module reaches through a request. */
#ifndef ENTITYD_APP_H
#define ENTITYD_APP_H

#include <stdbool.h>
#include <uv.h>

#include "config.h"

struct server;
struct store;
struct auth;
struct pagecache;

typedef struct app {
    uv_loop_t *loop;
    config cfg;
    struct server *server;
    struct store *store;
    struct auth *auth;
    struct pagecache *pages; /* NULL when PAGE_CACHE_SIZE is 0 */
} app;

#endif
