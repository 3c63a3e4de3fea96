/* webhook_deliveries: an endpoint's delivery log, a delivery sent again, and a test send
 * (CONTRACT section 14, "Deliveries"), for the entity's owners and admins. The log is written
 * by the delivery engine (push/webhook.h); these routes read it, mark a delivery due, or hand
 * the engine one message that is written nowhere. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "api/respond.h"
#include "auth/auth.h"
#include "core/app.h"
#include "core/isotime.h"
#include "push/event.h"
#include "push/webhook.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/reads.h"
#include "resources/webhook_deliveries.h"

/* "<entity id>:<event id>" */
#define DELIVERY_ID_SIZE (IDS_SIZE + EVENT_ID_MAX + 9)

/* The path's entity and endpoint ids, or a 404 answered. */
static bool path_ids(request *req, char eid[IDS_SIZE], char wid[WEBHOOK_ID_SIZE])
{
    if (!entity_path_id(req, eid))
        return false;
    slice w = request_path_param(req, 1);
    if (!webhook_id_valid(w.s, w.len)) {
        request_fail(req, 404, "not_found", "No such webhook.", NULL);
        return false;
    }
    memcpy(wid, w.s, w.len);
    wid[w.len] = '\0';
    return true;
}

/* A delivery id of entity eid: "<eid>:<event id>", or "<eid>:<event id>:trimmed" (the record
 * of events trimmed before they were taken, wh_take.lua). */
static bool delivery_id_valid(const char *eid, const char *s, size_t len)
{
    size_t el = strlen(eid), tl = strlen(":trimmed");
    if (len > tl && !memcmp(s + len - tl, ":trimmed", tl))
        len -= tl;
    return len > el + 1 && len < DELIVERY_ID_SIZE && !memcmp(s, eid, el) && s[el] == ':' &&
           event_id_valid(s + el + 1, len - el - 1);
}

static const char *platform_arg(request *req)
{
    return auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0";
}

/* ---- GET /api/entities/{id}/webhooks/{wid}/deliveries ---- */

static void on_page(void *data, int status, redisReply *r)
{
    request *req = data;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_ARRAY, "wh_deliveries: unexpected reply"))
        return;
    if (r->elements < 1) {
        request_fail_internal(req, "wh_deliveries: unexpected reply");
        return;
    }
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    size_t n = r->elements - 1;
    for (size_t i = 0; i < n; i++) {
        if (i)
            buf_append(b, ",", 1);
        const redisReply *d = r->element[i];
        if (d->type == REDIS_REPLY_STRING)
            buf_append(b, d->str, d->len);
        else
            buf_append_str(b, "null");
    }
    buf_append_str(b, "],\"nextCursor\":");
    const redisReply *next = r->element[n];
    if (next->type == REDIS_REPLY_STRING && next->len) {
        buf_append(b, "\"", 1);
        buf_append_json_escaped(b, next->str, next->len);
        buf_append_str(b, "\"}");
    } else {
        buf_append_str(b, "null}");
    }
    respond_send(req, 200, b);
}

void webhook_deliveries_get(request *req)
{
    char eid[IDS_SIZE], wid[WEBHOOK_ID_SIZE];
    long limit;
    if (!path_ids(req, eid, wid) || !reads_limit(req, 100, 20, &limit))
        return;
    size_t clen = 0;
    const char *cursor = request_param(req, "cursor", &clen);
    if (!cursor)
        cursor = "";
    if (clen && !delivery_id_valid(eid, cursor, clen)) {
        request_fail_field(req, "cursor", "cursor must be a delivery id from the page before.");
        return;
    }
    entity_keys k;
    keys_entity(&k, eid);
    char hooks[KEYS_ENTITY_SIZE], wh[KEYS_WEBHOOK_SIZE], lim[BUF_INT_SIZE];
    keys_webhooks(hooks, eid);
    keys_webhook(wh, eid, wid, "");
    buf_format_int(lim, limit);
    const char *head[] = {k.entity,    k.owners,          k.admins, hooks, wh,
                          req->caller, platform_arg(req), wid,      lim,   cursor};
    entity_script(req, LUA_WH_DELIVERIES, on_page, 5, head, sizeof head / sizeof head[0], NULL, 0);
}

/* ---- POST /api/entities/{id}/webhooks/{wid}/deliveries/{did}/retry ---- */

void webhook_deliveries_retried(void *data, int status, redisReply *r)
{
    request *req = data;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_STRING, "wh_retry: unexpected reply"))
        return;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":");
    buf_append(b, r->str, r->len);
    buf_append_str(b, "}");
    respond_send(req, 200, b);
}

void webhook_delivery_retry(request *req)
{
    char eid[IDS_SIZE], wid[WEBHOOK_ID_SIZE], did[DELIVERY_ID_SIZE];
    if (!path_ids(req, eid, wid))
        return;
    slice d = request_path_param(req, 2);
    if (!delivery_id_valid(eid, d.s, d.len)) {
        request_fail(req, 404, "not_found", "No such delivery.", NULL);
        return;
    }
    memcpy(did, d.s, d.len);
    did[d.len] = '\0';
    entity_write w;
    entity_write_fill(req, eid, isotime_now_ms(), &w);
    char hooks[KEYS_ENTITY_SIZE], wh[KEYS_WEBHOOK_SIZE];
    keys_webhooks(hooks, eid);
    keys_webhook(wh, eid, wid, "");
    const char *head[] = {w.k.entity,  w.k.owners,        w.k.admins, hooks, wh,
                          req->caller, platform_arg(req), wid,        did,   w.ev.max};
    entity_script(req, LUA_WH_RETRY, webhook_deliveries_retried, 5, head,
                  sizeof head / sizeof head[0], NULL, 0);
}

/* ---- POST /api/entities/{id}/webhooks/{wid}/test ---- */

typedef struct test_state {
    char eid[IDS_SIZE], wid[WEBHOOK_ID_SIZE];
} test_state;

void webhook_deliveries_tested(void *data, bool ok, long http_status, const char *reason)
{
    request *req = data;
    json_t *d = json_pack("{s:s, s:o, s:o}", "status", ok ? "succeeded" : "failed",
                          "responseStatus", http_status ? json_integer(http_status) : json_null(),
                          "reason", ok || !reason ? json_null() : json_string(reason));
    request_reply(req, 200, json_pack("{s:b, s:o}", "success", 1, "data", d));
}

static void on_target(void *data, int status, redisReply *r)
{
    request *req = data;
    test_state *st = req->state;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_ARRAY, "wh_target: unexpected reply"))
        return;
    if (r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING) {
        request_fail_internal(req, "wh_target: unexpected reply");
        return;
    }
    json_t *w = json_loadb(r->element[0]->str, r->element[0]->len, 0, NULL);
    const char *url = json_string_value(json_object_get(w, "url"));
    if (!json_is_true(json_object_get(w, "enabled")) || !url) {
        json_decref(w);
        request_fail(req, 409, "conflict", "The webhook is disabled: nothing is sent to it.", NULL);
        return;
    }
    int rc = webhooks_send_test(req->app->webhooks, st->eid, st->wid, url, r->element[1]->str,
                                r->element[1]->len, webhook_deliveries_tested, req);
    json_decref(w);
    if (rc != 0)
        request_fail(req, 503, "unavailable", "The test message could not be sent now.", NULL);
}

void webhook_test_post(request *req)
{
    test_state *st = arena_alloc(&req->pool, sizeof *st);
    if (!st) {
        request_fail_internal(req, "webhook test: out of memory");
        return;
    }
    if (!path_ids(req, st->eid, st->wid))
        return;
    req->state = st;
    entity_keys k;
    keys_entity(&k, st->eid);
    char hooks[KEYS_ENTITY_SIZE];
    keys_webhooks(hooks, st->eid);
    const char *head[] = {k.entity,    k.owners,          k.admins, hooks,
                          req->caller, platform_arg(req), st->wid};
    entity_script(req, LUA_WH_TARGET, on_target, 4, head, sizeof head / sizeof head[0], NULL, 0);
}
