/* webhook: delivery of entities' events to their webhook endpoints (CONTRACT section 14).
 *
 * Every instance looks through the webhooks set (keys.h) every WEBHOOK_POLL_MS and leases the
 * endpoints no live instance holds (wh_lease.lua; WEBHOOK_LEASE_MS, renewed at each look). For
 * each endpoint it holds, enabled and not paused, wh_take.lua hands out the next deliveries,
 * at most WEBHOOK_INFLIGHT in flight, in event order: those due again first, then the events
 * after the endpoint's cursor, each written to the log (pending) as the cursor passes it. Each
 * attempt is an HTTP POST on the loop (send.c) whose outcome wh_result.lua records: succeeded,
 * due again on the retry schedule, or failed. An attempt in flight is due again at its
 * deadline plus the lease, so the one a dead instance started is made again by the next
 * holder: at least once. Never on a request's path: requests only read and write Redis. */
#ifndef ENTITYD_PUSH_WEBHOOK_H
#define ENTITYD_PUSH_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

struct app;
typedef struct webhooks webhooks;

/* "wh-" + a lowercase UUIDv4 */
#define WEBHOOK_ID_SIZE 40
bool webhook_id_valid(const char *s, size_t len);

/* Starts the look-ups on a->loop (a->store must exist). NULL when out of memory or the HTTP
 * client cannot start. */
webhooks *webhooks_new(struct app *a);
/* Stops looking; attempts in flight end (their outcome is not recorded: the leases lapse and
 * the next holder makes them again). */
void webhooks_close(webhooks *w);
/* After the loop has stopped; NULL is fine. */
void webhooks_free(webhooks *w);
/* An endpoint was made or changed here: look through the set now, not at the next poll. */
void webhooks_kick(webhooks *w);
/* Metrics source (metrics.h). */
void webhooks_render_metrics(buf *out, void *ctx);

/* A test send's outcome: status "succeeded" or "failed", the HTTP status (0: none) and the
 * reason of a failure. */
typedef void (*webhooks_test_cb)(void *data, bool ok, long http_status, const char *reason);
/* Sends a webhook.test message to url, signed with secrets (a sec:<wid> field), for the
 * endpoint wid of entity_id, as a delivery is sent but written nowhere. cb runs once, never
 * inside this call. Returns 0, or -1 when it could not start (cb will not run). */
int webhooks_send_test(webhooks *w, const char *entity_id, const char *wid, const char *url,
                       const char *secrets, size_t secrets_len, webhooks_test_cb cb, void *data);

#endif
