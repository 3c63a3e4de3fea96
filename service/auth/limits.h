/* limits: an address's write budget and creation quota (CONTRACT section 7), kept in Redis so
 * that every instance charges the same budget. */
#ifndef ENTITYD_LIMITS_H
#define ENTITYD_LIMITS_H

#include <stdbool.h>

#include "http/request.h"

enum limits_kind {
    LIMITS_WRITES = 0, /* RATE_WRITES_PER_MINUTE: every signed write */
    LIMITS_CREATIONS,  /* ENTITY_CREATE_PER_DAY: entity creations */
    LIMITS_KINDS
};

/* The answer of a charge: status is a store_status; on STORE_OK, wait_ms is 0 when the unit was
 * taken, else the milliseconds until one is free (nothing was taken). */
typedef void (*limits_done)(request *req, void *data, int status, long long wait_ms);

/* The write budget's leases (auth/lease.h): a process takes units from Redis ahead of its
 * writes, up to a sixteenth of the budget per address, and hands back what it has not spent
 * after RATE_LEASE_MS (0: none taken ahead, every write charges its own unit). Returns 0 with
 * *out NULL when there is no write budget, 0 with *out set, or -1 (out of memory). */
typedef struct limits limits;
int limits_new(limits **out, struct app *a);
/* Hands every unit held back to Redis and closes the sweep timer; `closed` runs once that is
 * done (the hand-backs answered, or failed), before the store may close. NULL: runs at once. */
void limits_close(limits *lim, void (*closed)(void *ctx), void *ctx);
/* Frees the table; after the loop has stopped. Accepts NULL. */
void limits_free(limits *lim);

/* The limit is configured on and applies to the caller (platform admins are exempt). */
bool limits_apply(const request *req, int kind, bool platform_admin);
/* Takes one unit of the caller's limit: from the caller's lease when it holds one (done runs
 * before this returns), else with one script on the caller's own key (its own slot), which
 * for the write budget also takes units ahead for the lease. done runs exactly once, maybe
 * before this returns (a leased unit, store not ready, or shed). */
void limits_take(request *req, int kind, const char *caller, limits_done done, void *data);
/* Hands back a unit taken for a request that was then refused: to the caller's lease when it
 * is taking units ahead, else to Redis (fire and forget). */
void limits_give(request *req, int kind, const char *caller);
/* Answers a refused charge: 429 rate_limited with Retry-After, counted by route; or 503/504
 * for a charge Redis did not answer. */
void limits_refuse(request *req, int kind, int status, long long wait_ms);
/* Registers the limited-request counters as a metrics source. */
void limits_register_metrics(void);

#endif
