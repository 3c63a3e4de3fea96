/* backfill: indexes the entities an earlier release stored (CONTRACT §9, "Upgrade"): once per
 * deployment, by whichever instance holds its lease, resumable from its SCAN cursors in Redis.
 * The index adds are the same as the writes' (indexes.h) and idempotent, so a step run twice
 * (a lease lost mid-step, an instance killed) changes nothing. */
#ifndef ENTITYD_BACKFILL_H
#define ENTITYD_BACKFILL_H

struct app;

/* Starts trying (its timer checks the store, the done flag and the lease); registers the
 * metrics. One per process. */
void backfill_start(struct app *a);
/* Stops it: no new step; the answers of one in flight are ignored. Before the store closes. */
void backfill_stop(void);

#endif
