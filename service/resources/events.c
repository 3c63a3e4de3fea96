/* events: GET /api/entities/{id}/events (CONTRACT §5), the entity's event feed, for its owners
 * and admins. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/app.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/reads.h"
#include "core/ids.h"
#include "core/log.h"
#include "redis/keys.h"
#include "api/respond.h"
#include "redis/store.h"

/* A stream id "<ms>-<seq>", both up to 20 digits. */
#define EVENT_ID_MAX 41

/* A stream id "<ms>-<seq>", each part 1 to 20 digits within 64 bits. */
static bool valid_event_id(const char *s, size_t len)
{
    const char *dash = memchr(s, '-', len);
    if (!dash || len > EVENT_ID_MAX)
        return false;
    const char *parts[2] = {s, dash + 1};
    size_t lens[2] = {(size_t)(dash - s), len - (size_t)(dash - s) - 1};
    for (int i = 0; i < 2; i++) {
        if (!reads_all_digits(parts[i], lens[i]) || lens[i] > 20)
            return false;
        if (lens[i] == 20 && memcmp(parts[i], "18446744073709551615", 20) > 0)
            return false;
    }
    return true;
}

static void on_events(void *data, int status, redisReply *r)
{
    request *req = data;
    long limit = *(long *)req->state;
    r = (redisReply *)entity_gate_reply(req, status, r);
    if (!r)
        return;
    /* The gate's answer: {HMGET id isEnabled public, SISMEMBER owners, SISMEMBER admins,
     * HEXISTS members, XRANGE}, the XRANGE only where the caller may read the events. */
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 4 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements != 3 ||
        r->element[1]->type != REDIS_REPLY_INTEGER || r->element[2]->type != REDIS_REPLY_INTEGER) {
        request_fail_internal(req, "events: unexpected reply");
        return;
    }
    const redisReply *f = r->element[0];
    if (f->element[0]->type == REDIS_REPLY_NIL) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return;
    }
    bool enabled = entity_flag(f->element[1]), owner = r->element[1]->integer != 0,
         admin = r->element[2]->integer != 0;
    if (!reads_is_platform(req)) {
        if (!enabled && !owner) {
            request_fail(req, 404, "not_found", "No such entity.", NULL);
            return;
        }
        if (!owner && !admin) {
            request_fail(req, 403, "forbidden",
                         "Only the entity's owners and admins may read its events.", NULL);
            return;
        }
    }
    if (r->elements != 5 || r->element[4]->type != REDIS_REPLY_ARRAY) {
        request_fail_internal(req, "events: unexpected reply");
        return;
    }
    const redisReply *list = r->element[4];
    size_t n = list->elements < (size_t)limit ? list->elements : (size_t)limit;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    const redisReply *last = NULL;
    size_t skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = list->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_STRING ||
            !valid_event_id(e->element[0]->str, e->element[0]->len) ||
            e->element[1]->type != REDIS_REPLY_ARRAY) {
            skipped++;
            continue;
        }
        const redisReply *fields = e->element[1], *type = NULL, *at = NULL, *actor = NULL,
                         *payload = NULL;
        for (size_t j = 0; j + 1 < fields->elements; j += 2) {
            const redisReply *k = fields->element[j], *v = fields->element[j + 1];
            if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
                continue;
            if (!strcmp(k->str, "type"))
                type = v;
            else if (!strcmp(k->str, "at"))
                at = v;
            else if (!strcmp(k->str, "actor"))
                actor = v;
            else if (!strcmp(k->str, "data"))
                payload = v;
        }
        if (last)
            buf_append(b, ",", 1);
        last = e->element[0];
        buf_append_str(b, "{\"id\":\"");
        buf_append(b, last->str, last->len);
        buf_append_str(b, "\",\"type\":\"");
        if (type)
            buf_append_json_escaped(b, type->str, type->len);
        buf_append_str(b, "\",\"at\":\"");
        if (at)
            buf_append_json_escaped(b, at->str, at->len);
        buf_append_str(b, "\",\"actor\":");
        if (actor && actor->len) {
            buf_append(b, "\"", 1);
            buf_append_json_escaped(b, actor->str, actor->len);
            buf_append(b, "\"", 1);
        } else {
            buf_append_str(b, "null");
        }
        buf_append_str(b, ",\"data\":");
        /* The object the write script stored as text, embedded as JSON once it parses. */
        json_t *obj = payload ? json_loadb(payload->str, payload->len, 0, NULL) : NULL;
        if (json_is_object(obj)) {
            buf_append(b, payload->str, payload->len);
        } else {
            buf_append_str(b, "{}");
            skipped += payload != NULL;
        }
        json_decref(obj);
        buf_append(b, "}", 1);
    }
    if (skipped) {
        buf *line = log_begin(LOG_WARN, "events page: malformed entries");
        if (line) {
            log_int(line, "skipped", (int64_t)skipped);
            log_end(line);
        }
    }
    buf_append_str(b, "],\"nextCursor\":");
    if (list->elements > (size_t)limit && n > 0) {
        const redisReply *e = list->element[n - 1];
        if (e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
            e->element[0]->type == REDIS_REPLY_STRING &&
            valid_event_id(e->element[0]->str, e->element[0]->len)) {
            buf_append(b, "\"", 1);
            buf_append(b, e->element[0]->str, e->element[0]->len);
            buf_append_str(b, "\"}");
        } else {
            buf_append_str(b, "null}");
        }
    } else {
        buf_append_str(b, "null}");
    }
    respond_send(req, 200, b);
}

void events_get(request *req)
{
    char id[IDS_SIZE];
    long *limit = arena_alloc(&req->pool, sizeof *limit);
    if (!limit) {
        request_fail_internal(req, "out of memory");
        return;
    }
    if (!entity_path_id(req, id) || !reads_limit(req, 1000, 100, limit))
        return;
    size_t len;
    const char *after = request_param(req, "after", &len);
    char start[EVENT_ID_MAX + 2] = "-";
    if (after && !len)
        after = NULL; /* empty: omitted, as an empty cursor elsewhere */
    if (after) {
        if (!valid_event_id(after, len)) {
            request_fail_field(req, "after", "after must be an event id (<ms>-<seq>).");
            return;
        }
        snprintf(start, sizeof start, "(%s", after);
    }
    req->state = limit;
    entity_keys k;
    keys_entity(&k, id);
    char events[KEYS_ENTITY_SIZE + 16], count[24];
    snprintf(events, sizeof events, "%s:events", k.entity);
    snprintf(count, sizeof count, "%ld", *limit + 1);
    /* Nothing follows the last possible id (which "(" cannot step past): an empty range. */
    const char *end = "+";
    if (after && !strcmp(after, "18446744073709551615-18446744073709551615"))
        memcpy(start, "+", 2), end = "-";
    static const char *const fields[] = {"id", "isEnabled", "public"};
    static const size_t flens[] = {2, 9, 6};
    const char *range[] = {"XRANGE", events, start, end, "COUNT", count};
    size_t rlens[] = {6, strlen(events), strlen(start), 1, 5, strlen(count)};
    store_cmd xrange = {6, range, rlens}, cmd;
    /* Gated (entity.h): a caller who may not read the events costs Redis the role lookups,
     * not the page. */
    entity_gate g;
    entity_gate_init(&g, req, &k, 'e', 3, fields, flens);
    entity_gate_add(&g, &xrange);
    if (entity_gate_cmd(&g, req, &cmd))
        store_exec(req->app->store, on_events, req, 1, &cmd);
}
