/* sentinel: Sentinel mode (REDIS_SENTINELS, REDIS_SENTINEL_MASTER) as the locator of the single
 * connection (single.h): where the primary is, asked of the sentinels before each connect; a
 * ROLE check in the handshake; and word when it moves (+switch-master), which drops the
 * connection to the old one. Internal to redis/. */
#ifndef ENTITYD_SENTINEL_H
#define ENTITYD_SENTINEL_H

#include <stddef.h>

#include "redis/single.h"

struct app;
typedef struct sentinel sentinel;

/* Parses the sentinel list. Returns 0, or -1 with a sentence in err when the list or the master
 * name is malformed. Given to single_new with sentinel_locator, which then owns it; listening
 * for +switch-master starts with the connection (the locator's start). */
int sentinel_new(sentinel **out, struct app *a, char *err, size_t err_len);
extern const single_locator sentinel_locator;

#endif
