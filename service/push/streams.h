/* streams: the event streams of CONTRACT section 14 (GET /api/entities/{id}/events/stream),
 * everything after the route's gate: per entity a group of open streams; each new event read
 * once per entity (an XRANGE after the last id the group has seen, when watch.h says the
 * entity's events may have grown) and rendered once, its bytes shared by every stream of the
 * entity (net/chunk.h); a ":" comment every STREAM_HEARTBEAT_SECONDS; the resume from the
 * kept log, handed over to the live feed without a gap or a duplicate; the limits; and the
 * re-check that ends a stream whose caller may no longer read (a function the resources
 * layer hands in, run once per distinct credential every STREAMS_RECHECK_MS). Loop thread. */
#ifndef ENTITYD_PUSH_STREAMS_H
#define ENTITYD_PUSH_STREAMS_H

#include <stdbool.h>
#include <stddef.h>

#include "http/request.h"

struct app;
struct watch;
struct redisReply;
typedef struct streams streams;

/* How often every open stream's caller is checked again: a stream ends within this and a
 * round trip of its caller losing the right (the contract says 5 s). */
#define STREAMS_RECHECK_MS 2000
/* Entries one read of the log takes (a backlog is read in pages of this). */
#define STREAMS_PAGE 200

/* The re-check: replays a stream's credential (`cred`, the bytes streams_open was given) and
 * calls done(token, status) once, maybe before it returns: 200 while the caller may still
 * read the stream; 401, 403, 404 end every stream opened with that credential; anything else
 * (the store down) keeps them until the next check. */
typedef void (*streams_verdict)(void *token, int status);
typedef void (*streams_check)(void *ctx, const char *cred, size_t len, streams_verdict done,
                              void *token);

streams *streams_new(struct app *a, struct watch *w);
void streams_set_check(streams *h, streams_check fn, void *ctx);
/* The drain: every stream ends (what is queued is still written), and no new one opens. */
void streams_close(streams *h);
/* After the loop has stopped; NULL is fine. */
void streams_free(streams *h);

/* May the caller open one more stream? If not, answers req 503 (MAX_STREAMS open, or
 * draining) or 429 (STREAMS_PER_CALLER open by this caller) and returns false. Asks nothing of
 * Redis. */
bool streams_may_open(const streams *h, request *req, const char *caller);

/* Where a stream starts: after the event `after` ("" : with what happens next), and the
 * answer to the first read the route's gate made: with `after`, XRANGE <events> <after> +
 * COUNT STREAMS_PAGE+1 (the id itself first when it is still kept); without, XREVRANGE
 * <events> + - COUNT 1. */
typedef struct streams_start {
    const char *after;
    const struct redisReply *first;
} streams_start;

/* Answers req with a stream of the entity's events for caller (or 503/429 when it may not
 * open one now). cred: the credential the re-check replays (copied). */
void streams_open(streams *h, request *req, const char *entity_id, const char *caller,
                  const char *cred, size_t cred_len, const streams_start *start);

/* Streams open now (the metric). */
size_t streams_count(const streams *h);
/* A metrics source (core/metrics.h); ctx is the hub. */
void streams_render_metrics(buf *out, void *ctx);

#endif
