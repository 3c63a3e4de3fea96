/* group: calls of one script that arrive in the same loop turn and share their leading keys
 * and arguments (the awards to one entity by one caller, at the turn's time) leave as one EVALSHA
 * in the loop's check phase. Redis then pays the call's fixed costs (reading the command, entering
 * Lua, the checks every call repeats) once for all of them.
 *
 * The one call's keys are the shared keys, then each call's own keys in turn; its arguments
 * are the shared ones, then the number of calls, then for each call its key count, its
 * argument count and its arguments. The script answers an array with one reply per call, in
 * order, each what the call alone would have answered: it runs them one after the other, so
 * the group means the same as the calls sent one by one, back to back. An answer for the group
 * as a whole (an error reply, STORE_TIMEOUT, STORE_UNAVAILABLE) is every call's answer. */
#ifndef ENTITYD_GROUP_H
#define ENTITYD_GROUP_H

#include <stdint.h>
#include <uv.h>

#include "redis/command.h"

struct store;
typedef struct group group;

/* At most this many calls, and this many bytes of arguments, go in one group: past them a new
 * group opens, so that no single script keeps Redis busy for long. */
#define GROUP_MAX_CALLS 32
#define GROUP_MAX_BYTES (64 * 1024)

/* NULL when out of memory. */
group *group_new(uv_loop_t *loop, struct store *st);
/* Queues one call of `script`: argv holds the shared keys (nshared_keys), the shared arguments
 * (nshared_args), then the call's own keys (nkeys) and arguments (the rest, up to argc); all
 * are copied. Calls whose script and shared part are byte for byte the same share a group. cb
 * runs exactly once, with the call's own reply; never before this returns, except after
 * group_close (the call then leaves alone, at once, and a closed store answers it there). */
void group_script(group *g, int script, store_cb cb, void *data, int nshared_keys, int nshared_args,
                  int nkeys, int argc, const char **argv, const size_t *lens);
/* The same call as a group of one, sent at once: for calls whose keys may not share a script
 * with others (each in a slot of its own in Redis Cluster), so that one script serves both. */
void group_script_alone(group *g, int script, store_cb cb, void *data, int nshared_keys,
                        int nshared_args, int nkeys, int argc, const char **argv,
                        const size_t *lens);
/* The wall clock in ms as read once for this turn of the loop (until its check phase): calls
 * made in one turn that take their time from here share it byte for byte, so it can travel in
 * their shared part, once per group. Read afresh while the group is sending or closed. */
int64_t group_now_ms(group *g);
/* Sends what is queued now and closes the check handle; a later call is sent alone, at once.
 * group_free after the loop has stopped. */
void group_close(group *g);
void group_free(group *g);

#endif
