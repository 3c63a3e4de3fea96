/* sentinel: where the primary is, asked of Redis Sentinels (REDIS_SENTINELS,
 * REDIS_SENTINEL_MASTER), and word when it moves (+switch-master). Internal to redis/: the store
 * asks before each connect in sentinel mode and drops its connection when told of a switch. */
#ifndef ENTITYD_SENTINEL_H
#define ENTITYD_SENTINEL_H

#include <stdbool.h>
#include <stddef.h>

struct app;
typedef struct sentinel sentinel;

/* status 0 with host (valid during the call only) and port, or -1 when no sentinel named
 * the primary in time. */
typedef void (*sentinel_found_cb)(void *ctx, int status, const char *host, int port);
/* A sentinel announced that the primary moved. */
typedef void (*sentinel_switch_cb)(void *ctx);

/* Parses the sentinel list and starts listening for +switch-master. Returns 0, or -1 with a
 * sentence in err when the list or the master name is malformed. */
int sentinel_new(sentinel **out, struct app *a, sentinel_switch_cb on_switch, void *ctx, char *err,
                 size_t err_len);
/* Asks the sentinels in turn, each within REDIS_TIMEOUT_MS; cb runs exactly once, later (on
 * the loop), unless sentinel_close runs first. One lookup at a time. */
void sentinel_lookup(sentinel *s, sentinel_found_cb cb, void *ctx);
void sentinel_close(sentinel *s);
/* After the loop has stopped. */
void sentinel_free(sentinel *s);

#endif
