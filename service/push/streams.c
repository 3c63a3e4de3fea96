/* streams: the hub (streams.h): opening and ending streams, the limits, the heartbeat and the
 * re-check of callers. The groups and the fan-out are stream_group.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/metrics.h"
#include "net/sendpool.h"
#include "push/event.h"
#include "push/streams_int.h"

/* --- callers and credentials --- */

static caller_count **caller_slot(const streams *h, const char *caller)
{
    return &h->callers[hash_fnv1a(caller, strlen(caller)) & (h->ncallers_b - 1)];
}

static caller_count *caller_find(const streams *h, const char *caller)
{
    for (caller_count *c = *caller_slot(h, caller); c; c = c->hnext)
        if (!strcmp(c->caller, caller))
            return c;
    return NULL;
}

static caller_count *caller_take(streams *h, const char *caller)
{
    caller_count *c = caller_find(h, caller);
    if (!c) {
        if (strlen(caller) >= sizeof c->caller || !(c = calloc(1, sizeof *c)))
            return NULL;
        strcpy(c->caller, caller);
        caller_count **slot = caller_slot(h, caller);
        c->hnext = *slot;
        *slot = c;
    }
    c->n++;
    return c;
}

static void caller_drop(streams *h, caller_count *c)
{
    if (--c->n > 0)
        return;
    for (caller_count **p = caller_slot(h, c->caller); *p; p = &(*p)->hnext)
        if (*p == c) {
            *p = c->hnext;
            break;
        }
    free(c);
}

static cred *cred_take(streams *h, group *g, const char *bytes, size_t len)
{
    uint64_t hash = hash_fnv1a(bytes, len);
    cred **slot = &h->creds[hash & (h->ncreds_b - 1)];
    for (cred *c = *slot; c; c = c->hnext)
        if (c->hash == hash && c->len == len && c->g == g && !memcmp(c->bytes, bytes, len)) {
            c->refs++;
            return c;
        }
    cred *c = malloc(sizeof *c + len);
    if (!c)
        return NULL;
    *c = (cred){.g = g, .hash = hash, .refs = 1, .len = len};
    memcpy(c->bytes, bytes, len);
    c->hnext = *slot;
    *slot = c;
    h->ncreds++;
    return c;
}

static void cred_drop(streams *h, cred *c)
{
    if (--c->refs > 0)
        return;
    for (cred **p = &h->creds[c->hash & (h->ncreds_b - 1)]; *p; p = &(*p)->hnext)
        if (*p == c) {
            *p = c->hnext;
            break;
        }
    h->ncreds--;
    free(c);
}

/* --- a stream's end --- */

void streams_end(stream *s, bool finish)
{
    streams *h = s->h;
    if (s->c) {
        struct conn *c = s->c;
        s->c = NULL;
        if (finish)
            conn_stream_finish(c);
    }
    if (!s->g)
        return; /* already unlinked */
    group_unlink(s);
    cred_drop(h, s->cr);
    caller_drop(h, s->cc);
    h->open--;
    if (!s->reading)
        free(s);
}

/* The connection ended the stream (a reset, a half-close, a write that failed, the bound,
 * the drain). */
static void on_ended(void *data)
{
    stream *s = data;
    s->c = NULL;
    streams_end(s, false);
}

/* --- the hub --- */

static void on_beat(uv_timer_t *t);
static void on_recheck(uv_timer_t *t);

streams *streams_new(struct app *a, watch *w)
{
    streams *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->a = a;
    h->end = streams_end;
    h->w = w;
    h->ngroups_b = h->ncreds_b = h->ncallers_b = 4096;
    h->groups = calloc(h->ngroups_b, sizeof *h->groups);
    h->creds = calloc(h->ncreds_b, sizeof *h->creds);
    h->callers = calloc(h->ncallers_b, sizeof *h->callers);
    h->heartbeat = chunk_new(":\n\n", 3);
    h->sends = sendpool_new((int)a->cfg.stream_send_threads);
    if (!h->groups || !h->creds || !h->callers || !h->heartbeat || !h->sends) {
        streams_free(h);
        return NULL;
    }
    uint64_t beat = (uint64_t)a->cfg.stream_heartbeat_seconds * 1000;
    uv_timer_init(a->loop, &h->beat);
    h->beat.data = h;
    uv_timer_start(&h->beat, on_beat, beat, beat);
    uv_unref((uv_handle_t *)&h->beat);
    uv_timer_init(a->loop, &h->recheck);
    h->recheck.data = h;
    uv_timer_start(&h->recheck, on_recheck, STREAMS_RECHECK_MS, STREAMS_RECHECK_MS);
    uv_unref((uv_handle_t *)&h->recheck);
    return h;
}

void streams_set_check(streams *h, streams_check fn, void *ctx)
{
    h->check = fn;
    h->check_ctx = ctx;
}

/* Calls fn on every open stream; fn may end the one it is given. */
static void each_stream(streams *h, void (*fn)(stream *s, void *ctx), void *ctx)
{
    for (size_t i = 0; i < h->ngroups_b; i++)
        for (group *g = h->groups[i], *gnext; g; g = gnext) {
            g->busy++; /* ending its last stream must not free it under the loop */
            for (stream *s = g->head, *next; s; s = next) {
                next = s->next;
                fn(s, ctx);
            }
            gnext = g->hnext;
            g->busy--;
            group_release(g);
        }
}

static void end_one(stream *s, void *ctx)
{
    (void)ctx;
    streams_end(s, true);
}

void streams_close(streams *h)
{
    if (!h || h->closed)
        return;
    each_stream(h, end_one, NULL);
    h->closed = true;
    uv_close((uv_handle_t *)&h->beat, NULL);
    uv_close((uv_handle_t *)&h->recheck, NULL);
}

void streams_free(streams *h)
{
    if (!h)
        return;
    free(h->groups);
    free(h->creds);
    free(h->callers);
    chunk_unref(h->heartbeat);
    sendpool_free(h->sends);
    free(h);
}

static void beat_one(stream *s, void *ctx)
{
    if (s->c && s->live)
        fanout_queue(s, ctx);
}

static void on_beat(uv_timer_t *t)
{
    streams *h = t->data;
    each_stream(h, beat_one, h->heartbeat);
    fanout_flush(h);
}

/* --- the re-check: one per credential, its verdict for all of its streams --- */

static void end_by_cred(stream *s, void *ctx)
{
    if (s->cr == ctx)
        streams_end(s, true);
}

static void on_verdict(void *token, int status)
{
    cred *c = token;
    streams *h = c->g->h;
    c->checking = false;
    if (status == 401 || status == 403 || status == 404) {
        group *g = c->g;
        c->refs++; /* the streams' ends drop theirs */
        g->busy++;
        for (stream *s = g->head, *next; s; s = next) {
            next = s->next;
            h->ended_check += s->cr == c;
            end_by_cred(s, c);
        }
        g->busy--;
        cred_drop(h, c);
        group_release(g);
    }
    cred_drop(h, c);
}

static void on_recheck(uv_timer_t *t)
{
    streams *h = t->data;
    if (!h->check)
        return;
    /* Collected first: a verdict given at once may free credentials under the walk. */
    size_t n = 0;
    cred **todo = malloc((h->ncreds + 1) * sizeof *todo);
    if (!todo)
        return;
    for (size_t i = 0; i < h->ncreds_b; i++)
        for (cred *c = h->creds[i]; c; c = c->hnext)
            if (!c->checking && n < h->ncreds) {
                c->checking = true;
                c->refs++;
                todo[n++] = c;
            }
    for (size_t i = 0; i < n; i++)
        h->check(h->check_ctx, todo[i]->bytes, todo[i]->len, on_verdict, todo[i]);
    free(todo);
}

/* --- opening --- */

bool streams_may_open(const streams *h, request *req, const char *caller)
{
    const caller_count *c = caller_find(h, caller);
    if (h->closed || h->open >= (size_t)h->a->cfg.max_streams) {
        request_fail(req, 503, "unavailable", "This instance holds as many streams as it may.",
                     NULL);
        return false;
    }
    if (c && c->n >= h->a->cfg.streams_per_caller) {
        request_fail_retry(req, 429, "rate_limited", "Too many open streams for this caller.", 5);
        return false;
    }
    return true;
}

void streams_open(streams *h, request *req, const char *entity_id, const char *caller,
                  const char *cred_bytes, size_t cred_len, const streams_start *start)
{
    if (!streams_may_open(h, req, caller))
        return;
    stream *s = calloc(1, sizeof *s);
    group *g = s ? group_get(h, entity_id) : NULL;
    cred *cr = g ? cred_take(h, g, cred_bytes, cred_len) : NULL;
    caller_count *cc = cr ? caller_take(h, caller) : NULL;
    if (!cc) {
        if (cr)
            cred_drop(h, cr);
        if (g)
            group_release(g);
        free(s);
        request_fail_internal(req, "streams: out of memory");
        return;
    }
    *s = (stream){.h = h, .g = g, .cr = cr, .cc = cc};
    s->next = g->head;
    if (g->head)
        g->head->prev = s;
    g->head = s;
    g->n++;
    h->open++;
    h->opened++;
    /* The request's memory (where `after` lives) goes when its answer begins. */
    char after[EVENT_ID_MAX + 1];
    snprintf(after, sizeof after, "%s", start->after);
    streams_start from = {after, start->first};
    g->busy++;         /* the start may end the stream before it is handled */
    s->reading = true; /* … so its memory stays until then too */
    struct conn *c = request_stream_begin(req, "text/event-stream", NULL,
                                          (size_t)h->a->cfg.stream_buffer_bytes, on_ended, s);
    bool alive = c && s->g; /* the head's write may have failed and ended it already */
    s->reading = false;
    if (!alive && s->g) {
        streams_end(s, false); /* frees it */
    } else if (!alive) {
        free(s); /* ended by its connection already */
    } else {
        s->c = c;
        group_start_stream(s, &from);
    }
    g->busy--;
    group_release(g);
}

size_t streams_count(const streams *h)
{
    return h ? h->open : 0;
}

void streams_render_metrics(buf *out, void *ctx)
{
    const streams *h = ctx;
    if (!h)
        return;
    metrics_gauge(out, "entityd_streams_open", "Event streams open now.", (double)h->open);
    metrics_counter(out, "entityd_streams_opened_total", "Event streams opened.", h->opened);
    metrics_counter(out, "entityd_streams_events_total",
                    "Events queued to streams (one per stream and event).", h->events_sent);
    metrics_counter(out, "entityd_streams_ended_check_total",
                    "Streams ended because their caller may no longer read them.", h->ended_check);
    metrics_gauge(out, "entityd_streams_send_threads",
                  "Threads sharing the fan-outs' sends with the loop (started at the first).",
                  (double)sendpool_threads(h->sends));
    metrics_counter(out, "entityd_streams_shared_fanouts_total",
                    "Fan-outs whose sends those threads shared.", sendpool_shared_runs(h->sends));
}
