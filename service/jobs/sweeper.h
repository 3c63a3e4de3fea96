/* sweeper: takes removed members' board entries off the boards in the background, in bounded
 * steps, on every instance.
 *
 * A removal (resources/members.c) does not ZREM a member's entries from its boards, a random place
 * in skiplists of up to millions of entries each: it tombstones its XP entry (keys.h: lb:xp:gone,
 * every XP count subtracts those) and puts the member in the unswept set (keys.h: lb:unswept;
 * skill board reads skip non-members meanwhile). Before that it lists the entity in the sweeps
 * set (keys.h, its own slot), so that no crash can leave entries nobody finds. Each instance
 * polls the set; for an entity listed, one step after another (sweep_step.lua, one in flight, a
 * pause between two of at least 3 times the last step's round trip, so at most about a quarter
 * of Redis's time, less when Redis is busy) takes up to SWEEP_STEP_ENTRIES entries off:
 * tombstoned ones with their tombstones in board order (the step's ZREMs then walk nearby parts
 * of each board), then unswept members' skill entries, found from their prog hashes.
 * An earlier version's sweep records (keys.h) go together once no tombstone is left. Every step
 * is atomic and idempotent: a crash or restart loses nothing, and two instances on one entity
 * share its work. An entity with none left leaves the set once its entry is older than a
 * grace period and no removal listed it again (sweep_forget.lua). */
#ifndef ENTITYD_SWEEPER_H
#define ENTITYD_SWEEPER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "redis/store.h"

struct app;
typedef struct sweeper sweeper;

/* Starts the timer on a->loop (a->store must exist). Returns NULL when out of memory. */
sweeper *sweeper_new(struct app *a);
/* Whether a removal from entity `id` must list it in the sweeps set before its script: false
 * when this process listed it recently enough that the entry cannot have left the set (it
 * stays at least a grace period after its last listing). */
bool sweeper_must_list(sweeper *s, const char *id, int64_t now_ms);
/* Sends the listing of entity `id` in the sweeps set at now_ms (ZADD GT); cb gets its answer. */
void sweeper_send_listing(store *st, const char *id, int64_t now_ms, store_cb cb, void *data);
/* The entity was listed at now_ms (the ZADD succeeded). */
void sweeper_listed(sweeper *s, const char *id, int64_t now_ms);
/* A read found removed members of entity `id` waiting for the sweeper: lists it in the sweeps
 * set, unless this process did so lately, since an instance of the release before this one
 * drops an entity from the set once its gone zsets are empty, with its unswept set left. */
void sweeper_note_waiting(sweeper *s, const char *id);
/* A removal was just answered here: look for work soon rather than at the next poll. */
void sweeper_kick(sweeper *s);
/* Stops the timer; a step still in flight ends without a next one. */
void sweeper_close(sweeper *s);
/* Frees it; only after the loop has stopped. NULL is fine. */
void sweeper_free(sweeper *s);
/* Metrics source (metrics.h). */
void sweeper_render_metrics(buf *out, void *ctx);

#endif
