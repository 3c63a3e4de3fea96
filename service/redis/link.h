/* link: what every Redis connection of the store shares, written once: RESP framing, the Lua
 * scripts loaded by SCRIPT LOAD, the keys a command names, the deadline list of unanswered
 * units, the reconnect backoff and the bound on a silent connection. Used by the single
 * connection (single.c, also in Sentinel mode) and by each node of a cluster (cluster.c), so
 * that neither frames, times or retries in its own way. Internal to redis/. */
#ifndef ENTITYD_LINK_H
#define ENTITYD_LINK_H

#include <hiredis/async.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/backoff.h"
#include "core/buf.h"
#include "redis/command.h"

struct app;

/* The poll of every link's deadlines and silences, and the backoff between connects. */
#define LINK_TICK_MS        20
#define LINK_BACKOFF_MIN_MS 50
#define LINK_BACKOFF_MAX_MS 2000

/* --- RESP framing (hiredis's printf-style formatter costs more than the rest of a read) --- */

/* Appends one command, framed as RESP, to b. */
void link_frame(buf *b, int argc, const char **argv, const size_t *lens);
/* Frames one command and hands it to hiredis with its callback (fn may be NULL: the answer is
 * then dropped). Returns REDIS_OK or REDIS_ERR, as redisAsyncFormattedCommand. */
int link_send(redisAsyncContext *ac, redisCallbackFn *fn, void *priv, int argc, const char **argv,
              const size_t *lens);
/* SCRIPT LOAD of script `script` (lua_scripts.h). */
int link_send_script_load(redisAsyncContext *ac, redisCallbackFn *fn, void *priv, int script);
/* SCRIPT LOAD of every script, answers unheard: after a NOSCRIPT where the command cannot be
 * resent with the source (inside a transaction). */
void link_reload_scripts(redisAsyncContext *ac);
/* True when one of EXEC's answers is NOSCRIPT (the node lost its scripts). */
bool link_exec_lost_script(const redisReply *reply);
/* AUTH [user] password into argv/lens (room for 3); 0 when there is no password (no AUTH). */
int link_auth_argv(const char *user, const char *password, const char *argv[3], size_t lens[3]);

/* --- keys --- */

/* The keys a command names: argv[1], or a script's declared keys (EVALSHA sha numkeys key...).
 * Returns how many, the first at argv[*first]. Redis tracks exactly a script's declared keys,
 * so a read script must declare every key it reads. */
int link_cmd_keys(const store_cmd *c, int *first);

/* --- the deadline list: unanswered units, oldest first --- */

/* Embedded as the first member of a unit. */
typedef struct link_entry {
    struct link_entry *prev, *next;
    uint64_t deadline_ms;
} link_entry;

typedef struct link_list {
    link_entry *head, *tail;
} link_list;

void link_list_push(link_list *l, link_entry *e);
void link_list_unlink(link_list *l, link_entry *e);
/* The oldest entry when its deadline has passed at `now`, else NULL. */
static inline link_entry *link_list_expired(const link_list *l, uint64_t now)
{
    return l->head && l->head->deadline_ms <= now ? l->head : NULL;
}

/* --- connection life --- */

/* The wait before a reconnect, doubling while connects fail. */
typedef struct link_retry {
    uv_timer_t timer;
    backoff backoff;
} link_retry;

/* `fn` runs when the wait is over, with timer.data = data. */
void link_retry_init(link_retry *r, uv_loop_t *loop, void *data);
void link_retry_schedule(link_retry *r, uv_timer_cb fn);
/* The connection is up: the next failure waits the least again. */
void link_retry_reset(link_retry *r);

/* A connection with `outstanding` callbacks and no answer since `last_progress_ms` is as good
 * as dead (a silent network): true once that has lasted twice REDIS_TIMEOUT_MS (5 s at least). */
bool link_stalled(const struct app *a, size_t outstanding, uint64_t last_progress_ms, uint64_t now);

#endif
