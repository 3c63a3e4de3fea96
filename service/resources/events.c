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
#include "push/event.h"

static void on_events(void *data, int status, redisReply *r)
{
    request *req = data;
    long limit = *(long *)req->state;
    r = (redisReply *)entity_gate_reply(req, status, r);
    if (!r)
        return;
    if (!reads_events_gate(req, r, "events: unexpected reply"))
        return;
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
        event_view ev;
        if (!event_parse(list->element[i], &ev)) {
            skipped++;
            continue;
        }
        if (last)
            buf_append(b, ",", 1);
        last = list->element[i]->element[0];
        skipped += ev.data_len && !ev.data_ok;
        event_render_item(b, &ev);
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
            event_id_valid(e->element[0]->str, e->element[0]->len)) {
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
        if (!event_id_valid(after, len)) {
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
