/* stream_group: an entity's open streams (streams_int.h). The group reads the log after the
 * last event it has seen whenever watch.h says the entity's events may have grown, renders
 * each new event once and hands the same bytes to every live stream that has not had it.
 *
 * A new stream first sends what its own first read holds (the backlog after Last-Event-ID),
 * then reads on by itself until it stands at or past the group's place; from then on it is
 * live and the group's events after its own place are its. The group's place only moves when
 * a read of it is answered, and every read of one key goes to one connection in order, so
 * what the stream read itself and what the group reads next meet without a gap, and the
 * comparison of places drops what both read. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/app.h"
#include "core/buf.h"
#include "push/event.h"
#include "push/streams_int.h"
#include "redis/store.h"

bool event_pos_parse(const char *s, size_t len, event_pos *out)
{
    if (!event_id_valid(s, len))
        return false;
    const char *dash = memchr(s, '-', len);
    out->ms = strtoull(s, NULL, 10);
    out->seq = strtoull(dash + 1, NULL, 10);
    return true;
}

int event_pos_cmp(event_pos a, event_pos b)
{
    if (a.ms != b.ms)
        return a.ms < b.ms ? -1 : 1;
    return a.seq < b.seq ? -1 : a.seq > b.seq;
}

/* --- the table of groups by entity id --- */

static group **slot_of(streams *h, const char *id)
{
    return &h->groups[hash_fnv1a(id, strlen(id)) & (h->ngroups_b - 1)];
}

static void on_grow(void *data, const char *entity_id);

group *group_get(streams *h, const char *entity_id)
{
    for (group *g = *slot_of(h, entity_id); g; g = g->hnext)
        if (!strcmp(g->id, entity_id))
            return g;
    size_t len = strlen(entity_id);
    if (len >= sizeof((group *)0)->id)
        return NULL;
    group *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->h = h;
    memcpy(g->id, entity_id, len + 1);
    g->key_len = keys_events(g->key, entity_id);
    g->sub = watch_subscribe(h->w, entity_id, on_grow, g);
    if (!g->sub) {
        free(g);
        return NULL;
    }
    group **slot = slot_of(h, entity_id);
    g->hnext = *slot;
    *slot = g;
    h->ngroups++;
    return g;
}

/* Frees the group once it has no stream and nothing of it is in flight or on the stack. */
void group_release(group *g)
{
    if (g->n || g->busy)
        return;
    streams *h = g->h;
    for (group **p = slot_of(h, g->id); *p; p = &(*p)->hnext)
        if (*p == g) {
            *p = g->hnext;
            break;
        }
    h->ngroups--;
    watch_unsubscribe(g->sub);
    free(g);
}

void group_unlink(stream *s)
{
    group *g = s->g;
    if (s->prev)
        s->prev->next = s->next;
    else
        g->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    g->n--;
    s->g = NULL;
    group_release(g);
}

/* --- rendering --- */

static buf scratch = BUF_INIT;

/* "id: <id>\nevent: <type>\ndata: <the /events item>\n\n", or NULL (malformed, or no memory). */
static out_chunk *render(const redisReply *entry, event_pos *pos)
{
    event_view ev;
    if (!event_parse(entry, &ev) || !event_pos_parse(ev.id, ev.id_len, pos))
        return NULL;
    buf_reset(&scratch, 64 * 1024);
    buf_append_str(&scratch, "id: ");
    buf_append(&scratch, ev.id, ev.id_len);
    buf_append_str(&scratch, "\nevent: ");
    buf_append(&scratch, ev.type, ev.type_len);
    buf_append_str(&scratch, "\ndata: ");
    event_render_item(&scratch, &ev);
    if (buf_append_str(&scratch, "\n\n") != 0)
        return NULL;
    return chunk_new(scratch.data, scratch.len);
}

/* --- one stream's own reads --- */

static void stream_read(stream *s);

/* Sends the entries of a reply the stream reads itself (those after its place); false once it
 * has ended. */
static bool push_entries(stream *s, const redisReply *list, size_t from)
{
    for (size_t i = from; i < list->elements && s->c; i++) {
        event_pos pos;
        out_chunk *ch = render(list->element[i], &pos);
        if (!ch)
            continue;
        if (event_pos_cmp(pos, s->pos) > 0) {
            s->pos = pos;
            s->h->events_sent++;
            conn_stream_push(s->c, ch);
        }
        chunk_unref(ch);
    }
    return s->c != NULL;
}

static void group_read(group *g);

/* The stream stands where its reads took it: live when that is at or past the group's place
 * (the first to get there sets the group's place), else it reads on. */
static void go_live(stream *s)
{
    group *g = s->g;
    if (!g->known) {
        g->pos = s->pos;
        g->known = true;
        s->live = true;
        /* Events written between this stream's first read and the watch's tracked read may
         * have gone unheard: one read of the group catches them. */
        group_read(g);
    } else if (event_pos_cmp(s->pos, g->pos) >= 0) {
        s->live = true;
    } else {
        stream_read(s);
    }
}

/* After a read the stream made is handled: false when the stream is gone (freed here). */
static bool settle(stream *s)
{
    s->reading = false;
    if (s->c)
        return true;
    free(s);
    return false;
}

/* One page of the backlog from entry `from` of r: sent, then the next page read, or the
 * stream live when this was the last. */
static void backlog_page(stream *s, const redisReply *r, size_t from, bool more)
{
    push_entries(s, r, from);
    if (!settle(s))
        return;
    if (more)
        stream_read(s);
    else
        go_live(s);
}

static void on_stream_read(void *data, int status, redisReply *r)
{
    stream *s = data;
    if (!s->c) {
        settle(s);
        return;
    }
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY) {
        s->h->end(s, true); /* the client resumes with Last-Event-ID */
        settle(s);
        return;
    }
    backlog_page(s, r, 0, r->elements >= STREAMS_PAGE);
}

static void stream_read(stream *s)
{
    char from[48], count[16];
    snprintf(from, sizeof from, "(%" PRIu64 "-%" PRIu64, s->pos.ms, s->pos.seq);
    snprintf(count, sizeof count, "%d", STREAMS_PAGE);
    const char *argv[] = {"XRANGE", s->g->key, from, "+", "COUNT", count};
    size_t lens[] = {6, s->g->key_len, strlen(from), 1, 5, strlen(count)};
    s->reading = true;
    store_command(s->h->a->store, on_stream_read, s, 6, argv, lens);
}

void group_start_stream(stream *s, const streams_start *start)
{
    const redisReply *r = start->first;
    s->reading = true; /* what it pushes may end it: its memory stays until settle */
    if (!start->after[0]) {
        /* XREVRANGE + - COUNT 1: the newest event, after which the stream starts. */
        if (r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
            r->element[0]->elements == 2 && r->element[0]->element[0]->type == REDIS_REPLY_STRING)
            event_pos_parse(r->element[0]->element[0]->str, r->element[0]->element[0]->len,
                            &s->pos);
        if (settle(s))
            go_live(s);
        return;
    }
    /* XRANGE <after> + COUNT PAGE+1: the id itself first when the log still keeps it. */
    event_pos after;
    bool kept = event_pos_parse(start->after, strlen(start->after), &after) && r->elements > 0 &&
                r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2 &&
                r->element[0]->element[0]->type == REDIS_REPLY_STRING &&
                r->element[0]->element[0]->len == strlen(start->after) &&
                !memcmp(r->element[0]->element[0]->str, start->after, strlen(start->after));
    if (!kept) {
        /* Unknown or trimmed: from the oldest kept, after a gap the client can see. */
        static const char gap[] = "event: gap\ndata: {}\n\n";
        out_chunk *ch = chunk_new(gap, sizeof gap - 1);
        if (ch) {
            conn_stream_push(s->c, ch);
            chunk_unref(ch);
        }
        s->pos = (event_pos){0, 0};
        if (settle(s))
            stream_read(s);
        return;
    }
    s->pos = after;
    backlog_page(s, r, 1, r->elements > STREAMS_PAGE);
}

/* --- the group's reads and the fan-out --- */

/* --- the fan-out: every stream's chunks queued, then all written at once (the sends shared
 * by the hub's pool, net/sendpool.h) --- */

static struct conn **fan;
static size_t fan_n, fan_cap;

/* c has chunks queued for the next fanout_flush. False when out of memory: then it writes
 * them at once itself. */
static void fanout_add(struct conn *c)
{
    if (fan_n == fan_cap) {
        size_t cap = fan_cap ? fan_cap * 2 : 1024;
        struct conn **f = realloc(fan, cap * sizeof *f);
        if (!f) {
            conn_progress(c);
            return;
        }
        fan = f;
        fan_cap = cap;
    }
    fan[fan_n++] = c;
}

void fanout_flush(streams *h)
{
    /* The list is this call's alone: a write that ends a stream may lead to another fan-out
     * before it returns. */
    struct conn **list = fan;
    size_t n = fan_n, cap = fan_cap;
    fan = NULL;
    fan_n = fan_cap = 0;
    conn_stream_flush_all(h->sends, list, n);
    if (!fan) {
        fan = list;
        fan_cap = cap;
    } else {
        free(list);
    }
}

void fanout_queue(stream *s, out_chunk *ch)
{
    if (conn_stream_queue(s->c, ch))
        fanout_add(s->c);
}

/* A reply's events, rendered once each. */
typedef struct rendered {
    out_chunk *ch;
    event_pos pos;
} rendered;

/* Queues for a live stream the events after its place (it may end, and be freed, here). */
static void queue_events(stream *s, const rendered *evs, size_t n)
{
    bool queued = false;
    for (size_t i = 0; i < n; i++) {
        if (event_pos_cmp(evs[i].pos, s->pos) <= 0)
            continue;
        s->pos = evs[i].pos;
        s->h->events_sent++;
        if (!conn_stream_queue(s->c, evs[i].ch))
            return;
        queued = true;
    }
    if (queued)
        fanout_add(s->c);
}

static void on_group_read(void *data, int status, redisReply *r)
{
    group *g = data;
    g->reading = false;
    bool more = false;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ARRAY) {
        more = r->elements >= STREAMS_PAGE;
        rendered evs[STREAMS_PAGE];
        size_t n = 0;
        for (size_t i = 0; i < r->elements && n < STREAMS_PAGE; i++) {
            out_chunk *ch = render(r->element[i], &evs[n].pos);
            if (!ch)
                continue;
            evs[n++].ch = ch;
            if (event_pos_cmp(evs[n - 1].pos, g->pos) > 0)
                g->pos = evs[n - 1].pos;
        }
        /* A stream a queue ends leaves the list: the next one is taken first. */
        for (stream *s = g->head, *next; s && n; s = next) {
            next = s->next;
            if (s->live && s->c)
                queue_events(s, evs, n);
        }
        fanout_flush(g->h);
        for (size_t i = 0; i < n; i++)
            chunk_unref(evs[i].ch);
    }
    /* A failed read is tried again when the watch calls next (it polls while Redis is not
     * heard from); what it missed is still after the group's place. */
    bool again = (more || g->again) && status == STORE_OK && g->n && !g->h->closed;
    g->again = false;
    g->busy--;
    if (again)
        group_read(g);
    else
        group_release(g);
}

static void group_read(group *g)
{
    if (!g->known || g->h->closed)
        return;
    if (g->reading) {
        g->again = true;
        return;
    }
    char from[48], count[16];
    snprintf(from, sizeof from, "(%" PRIu64 "-%" PRIu64, g->pos.ms, g->pos.seq);
    snprintf(count, sizeof count, "%d", STREAMS_PAGE);
    const char *argv[] = {"XRANGE", g->key, from, "+", "COUNT", count};
    size_t lens[] = {6, g->key_len, strlen(from), 1, 5, strlen(count)};
    g->reading = true;
    g->busy++;
    store_command(g->h->a->store, on_group_read, g, 6, argv, lens);
}

static void on_grow(void *data, const char *entity_id)
{
    (void)entity_id;
    group_read(data);
}
