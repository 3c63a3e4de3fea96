/* erasure: the background erasure of deleted entities, in bounded steps, on every instance.
 *
 * DELETE of an entity (resources/entity_delete.c) adds the entity to the erasures set (keys.h) and
 * renames its hash to its erasure record; from then on nothing of it is readable or writable.
 * Each instance runs one erasure at a time: a timer reads the set, and one step after another
 * (erase_step.lua, one in flight, a pause between two) unlinks the entity's keys, the lease
 * and the cursor living in the record, so that another instance, or this one restarted, takes
 * over where a crashed one stopped. The step ends the erasure by deleting the record, after the
 * alias claim the record names is released (RELEASE); the set's entry goes after it. */
#ifndef ENTITYD_ERASURE_H
#define ENTITYD_ERASURE_H

#include "core/buf.h"

struct app;
typedef struct erasure erasure;

/* Starts the timer on a->loop (a->store must exist). Returns NULL when out of memory. */
erasure *erasure_new(struct app *a);
/* A delete was just answered here: look for work now rather than at the next poll. */
void erasure_kick(erasure *e);
/* Stops the timer; a step still in flight ends without a next one (the store answers it). */
void erasure_close(erasure *e);
/* Frees it; only after the loop has stopped. NULL is fine. */
void erasure_free(erasure *e);
/* Metrics source (metrics.h). */
void erasure_render_metrics(buf *out, void *ctx);

#endif
