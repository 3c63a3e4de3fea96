/* joinsweep: the re-check of the members who joined by an entity's rule (CONTRACT section 16,
 * "Staying true"), in the background, on every instance.
 *
 * A join puts the member in the entity's due zset (keys.h: join:due) a period on
 * (JOIN_RECHECK_SECONDS), so the checks spread over the period as the joins did, and lists the
 * entity in the joins registry (keys.h, its own slot) at its earliest due. The job wakes when
 * the registry's earliest due arrives (a timer, never more than a period),
 * and for each entity due takes batches (join_take.lua: up to JOINEVAL_MAX_ADDRS members due,
 * with those due a little ahead, so that batches are full and a period costs about one chain
 * read per JOINEVAL_MAX_ADDRS members,
 * under the entity's lease, Redis's clock, renewed at each batch, so one instance at a time
 * checks an entity and another goes on once a dead one's lease runs out), evaluates each
 * (jobs/joineval.h, background reads: they wait for the RPC cap instead of failing) and applies
 * its verdicts at once (join_verdicts.lua: a pass resets, a failure starts the grace or removes
 * once it ran, an error neither counts nor resets; every member checked is due a period on).
 * Between two batches it pauses JOINSWEEP_PAUSE_FACTOR times the batch's own time in Redis, so
 * that the re-check takes about a tenth of Redis's time at most and reads beside it keep their
 * pace. A rule change needs nothing: every member is due within one period anyway, and a
 * batch taken under the rule before is dropped (its members stay due). */
#ifndef ENTITYD_JOINSWEEP_H
#define ENTITYD_JOINSWEEP_H

#include <stddef.h>

#include "core/buf.h"
#include "jobs/joineval.h"
#include "rpc/joinread.h"

struct app;
typedef struct joinsweep joinsweep;

/* A stored rule made ready for joineval_start, with each leaf's path for the event of a lapse
 * ("rule.all[1]"). eval.tree points to tree_mem (malloc'd by the builder; joinsweep frees it). */
typedef struct joinsweep_rule {
    joineval_rule eval;
    void *tree_mem;
    char path[JOINEVAL_MAX_LEAVES][96];
} joinsweep_rule;

/* Builds out from the rule's stored JSON and its author: 0, or -1 when it does not parse (the
 * rules are above the jobs in the layers: main.c hands the api's builder in). */
typedef int (*joinsweep_build)(void *ctx, const char *json, size_t len, const char *author,
                               joinsweep_rule *out);

/* Starts the timer on a->loop (a->store must exist). jr: the chain reader, or NULL (the chain
 * leaves then err, and err removes nobody). Returns NULL when out of memory. */
joinsweep *joinsweep_new(struct app *a, joinread *jr, joinsweep_build build, void *build_ctx);
/* Stops the timer; a batch in flight ends without a next one. */
void joinsweep_close(joinsweep *s);
/* Frees it; only after the loop has stopped. NULL is fine. */
void joinsweep_free(joinsweep *s);
/* Metrics source (metrics.h). */
void joinsweep_render_metrics(buf *out, void *ctx);

#endif
