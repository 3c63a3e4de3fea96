/* events_stream: GET /api/entities/{id}/events/stream (CONTRACT section 14), the entity's
 * events as they happen (Server-Sent Events), for its owners and admins; and the re-check of
 * an open stream's caller that the hub (push/streams.h) runs every few seconds.
 *
 * The gate (entity.h, rule 'e') asks the roles first and reads the log's start only for a
 * caller who may read it; the hub takes the stream from there. The re-check replays the
 * stream's request, its URL and credentials, through the same dispatch as a probe: the same
 * sign-in (a session's record, an API key's, a signature's revocation, all read through the
 * read cache) and the same gate, read through the read cache as well, so a check costs Redis
 * nothing while nothing changed, and refuses exactly what the route would refuse now. */
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/dispatch.h"
#include "core/app.h"
#include "core/ids.h"
#include "push/event.h"
#include "push/streams.h"
#include "redis/keys.h"
#include "redis/store.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/reads.h"

typedef struct stream_req {
    char id[IDS_SIZE];
    char after[EVENT_ID_MAX + 1]; /* "" : from what happens next */
    entity_keys k;
    char events[KEYS_ENTITY_SIZE + 16];
} stream_req;

/* The credential a re-check replays: the request's target, Bearer value, session cookie and
 * Origin, each ended by a NUL. */
static size_t cred_of(const request *req, char *out, size_t cap)
{
    const char *parts[] = {buf_cstr((buf *)&req->url), req->bearer, req->session_cookie,
                           req->origin};
    size_t n = 0;
    for (size_t i = 0; i < 4; i++) {
        size_t len = strlen(parts[i]);
        if (n + len + 1 > cap)
            return 0;
        memcpy(out + n, parts[i], len + 1);
        n += len + 1;
    }
    return n;
}

static void on_gate(void *data, int status, redisReply *r)
{
    request *req = data;
    stream_req *st = req->state;
    r = (redisReply *)entity_gate_reply(req, status, r);
    if (!r)
        return;
    if (!reads_events_gate(req, r, "events stream: unexpected reply"))
        return;
    if (req->probe) {
        request_reply_empty(req, NULL); /* the caller may still read it */
        return;
    }
    if (r->elements != 5 || r->element[4]->type != REDIS_REPLY_ARRAY) {
        request_fail_internal(req, "events stream: unexpected reply");
        return;
    }
    char cred[1024];
    size_t cred_len = cred_of(req, cred, sizeof cred);
    if (!cred_len) {
        request_fail_internal(req, "events stream: credential too long");
        return;
    }
    streams_start start = {st->after, r->element[4]};
    streams_open(req->app->streams, req, st->id, req->caller, cred, cred_len, &start);
}

void events_stream_get(request *req)
{
    stream_req *st = request_state(req, sizeof *st);
    if (!st || !entity_path_id(req, st->id))
        return;
    if (!req->app->streams) {
        request_fail(req, 503, "unavailable", "Event streams are off on this instance.", NULL);
        return;
    }
    size_t len;
    const char *after = request_param(req, "after", &len);
    if (req->last_event_id[0] || req->last_event_id_bad) {
        /* What the client last had: an id this log never held resumes from its oldest. */
        snprintf(st->after, sizeof st->after, "%s",
                 !req->last_event_id_bad &&
                         event_id_valid(req->last_event_id, strlen(req->last_event_id))
                     ? req->last_event_id
                     : "0-0");
    } else if (after && len) {
        if (!event_id_valid(after, len)) {
            request_fail_field(req, "after", "after must be an event id (<ms>-<seq>).");
            return;
        }
        snprintf(st->after, sizeof st->after, "%.*s", (int)len, after);
    }
    /* Local counts only: a caller over its limit costs nothing (CONTRACT section 12). */
    if (!req->probe && !streams_may_open(req->app->streams, req, req->caller))
        return;
    keys_entity(&st->k, st->id);
    snprintf(st->events, sizeof st->events, "%s", st->k.events);
    static const char *const fields[] = {"id", "isEnabled", "public"};
    static const size_t flens[] = {2, 9, 6};
    char count[16];
    snprintf(count, sizeof count, "%d", STREAMS_PAGE + 1);
    const char *from_after[] = {"XRANGE", st->events, st->after, "+", "COUNT", count};
    size_t from_after_lens[] = {6, strlen(st->events), strlen(st->after), 1, 5, strlen(count)};
    const char *newest[] = {"XREVRANGE", st->events, "+", "-", "COUNT", "1"};
    size_t newest_lens[] = {9, strlen(st->events), 1, 1, 5, 1};
    store_cmd first = st->after[0] ? (store_cmd){6, from_after, from_after_lens}
                                   : (store_cmd){6, newest, newest_lens};
    store_cmd cmd;
    entity_gate g;
    entity_gate_init(&g, req, &st->k, 'e', 3, fields, flens);
    if (!req->probe)
        entity_gate_add(&g, &first);
    if (!entity_gate_cmd(&g, req, &cmd))
        return;
    if (req->probe)
        store_read_exec(req->app->store, 0, on_gate, req, 1, &cmd);
    else
        store_exec(req->app->store, on_gate, req, 1, &cmd);
}

/* --- the re-check --- */

typedef struct probe {
    request req;
    int status;
    streams_verdict done;
    void *token;
} probe;

static void probe_answer(request *req, int status, const char *ctype, const char *extra,
                         const slice *parts, size_t n)
{
    (void)ctype;
    (void)extra;
    (void)parts;
    (void)n;
    ((probe *)req->sink_ctx)->status = status;
}

static void probe_done(request *req)
{
    probe *p = req->sink_ctx;
    streams_verdict done = p->done;
    void *token = p->token;
    int status = p->status;
    request_reset(req);
    buf_free(&req->url);
    buf_free(&req->body);
    free(p);
    done(token, status);
}

static const request_sink probe_sink = {.answer = probe_answer, .done = probe_done};

void events_stream_check(void *ctx, const char *cred, size_t len, streams_verdict done, void *token)
{
    probe *p = calloc(1, sizeof *p);
    if (!p) {
        done(token, 500);
        return;
    }
    (void)len;
    const char *url = cred, *bearer = url + strlen(url) + 1, *cookie = bearer + strlen(bearer) + 1,
               *origin = cookie + strlen(cookie) + 1;
    request *req = &p->req;
    req->sink = &probe_sink;
    req->sink_ctx = p;
    req->app = ctx;
    req->route_slot = -1;
    req->method = HTTP_GET;
    req->probe = true;
    req->start_ns = request_now_ns();
    p->done = done;
    p->token = token;
    snprintf(req->bearer, sizeof req->bearer, "%s", bearer);
    snprintf(req->session_cookie, sizeof req->session_cookie, "%s", cookie);
    snprintf(req->origin, sizeof req->origin, "%s", origin);
    if (buf_append(&req->url, url, strlen(url)) != 0) {
        free(p);
        done(token, 500);
        return;
    }
    dispatch_request(req);
}
