/* webhook_platform: a platform endpoint's delivery log, a delivery sent again, and a test send
 * (CONTRACT section 14, "Deliveries", under /api/webhooks/{wid}), for platform admins alone,
 * refused here before anything is read (CONTRACT section 12). The endpoint lives in
 * webhooks:{platform}, its deliveries in each entity's log (keys.h): the log's page is the
 * endpoint's index of recent deliveries (whp:{<wid>}:recent), each row read from its entity. */
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
#define PLATFORM_DID_SIZE (IDS_SIZE + EVENT_ID_MAX + 9)

typedef struct plat_req {
    char wid[WEBHOOK_ID_SIZE], eid[IDS_SIZE], did[PLATFORM_DID_SIZE];
    char lim[BUF_INT_SIZE];
    const char *cursor;
    char *next; /* the page's next cursor, "" none */
    size_t rows, pending;
    char **row; /* each row's JSON, NULL: gone from its entity's log */
    size_t *row_len;
} plat_req;

/* The platform admin check, then the endpoint id of the path; NULL once answered. */
static plat_req *plat_open(request *req)
{
    if (!auth_is_platform_admin(req->app->auth, req->caller)) {
        request_fail(req, 403, "forbidden", "Only platform admins may manage platform webhooks.",
                     NULL);
        return NULL;
    }
    plat_req *p = request_state(req, sizeof *p);
    if (!p)
        return NULL;
    slice w = request_path_param(req, 0);
    if (!webhook_id_valid(w.s, w.len)) {
        request_fail(req, 404, "not_found", "No such webhook.", NULL);
        return NULL;
    }
    memcpy(p->wid, w.s, w.len);
    p->wid[w.len] = '\0';
    return p;
}

/* A delivery id "<entity id>:<event id>" (or its trimmed record's); its entity into eid. */
static bool did_parse(const char *s, size_t len, char eid[IDS_SIZE])
{
    size_t tl = strlen(":trimmed");
    if (len >= PLATFORM_DID_SIZE || len < IDS_SIZE + 1 || s[IDS_SIZE - 1] != ':' ||
        !ids_valid(s, IDS_SIZE - 1, 'c'))
        return false;
    if (len > tl && !memcmp(s + len - tl, ":trimmed", tl))
        len -= tl;
    if (!event_id_valid(s + IDS_SIZE, len - IDS_SIZE))
        return false;
    memcpy(eid, s, IDS_SIZE - 1);
    eid[IDS_SIZE - 1] = '\0';
    return true;
}

typedef void (*plat_next)(request *req);

typedef struct exists_call {
    request *req;
    plat_next next;
} exists_call;

static void on_exists(void *data, int status, redisReply *r);

/* Asks whether the endpoint exists (webhooks:{platform}), then next(req) or a 404. */
static void endpoint_exists(request *req, plat_req *p, plat_next next)
{
    exists_call *c = arena_alloc(&req->pool, sizeof *c);
    if (!c) {
        request_fail_internal(req, "platform webhook: out of memory");
        return;
    }
    c->req = req;
    c->next = next;
    const char *argv[] = {"HEXISTS", KEYS_WEBHOOKS_PLATFORM, p->wid};
    size_t lens[] = {7, strlen(KEYS_WEBHOOKS_PLATFORM), strlen(p->wid)};
    store_command(req->app->store, on_exists, c, 3, argv, lens);
}

static void on_exists(void *data, int status, redisReply *r)
{
    exists_call *c = data;
    if (!respond_store_reply(c->req, status, r, REDIS_REPLY_INTEGER,
                             "platform webhook: unexpected reply"))
        return;
    if (r->integer != 1) {
        request_fail(c->req, 404, "not_found", "No such webhook.", NULL);
        return;
    }
    c->next(c->req);
}

/* ---- GET /api/webhooks/{wid}/deliveries ---- */

static void page_send(request *req)
{
    plat_req *p = req->state;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":[");
    bool first = true;
    for (size_t i = 0; i < p->rows; i++) {
        if (!p->row[i])
            continue; /* trimmed from its entity's log, or the entity deleted */
        if (!first)
            buf_append(b, ",", 1);
        first = false;
        buf_append(b, p->row[i], p->row_len[i]);
    }
    buf_append_str(b, "],\"nextCursor\":");
    if (p->next[0]) {
        buf_append(b, "\"", 1);
        buf_append_json_escaped(b, p->next, strlen(p->next));
        buf_append_str(b, "\"}");
    } else {
        buf_append_str(b, "null}");
    }
    respond_send(req, 200, b);
}

typedef struct row_call {
    request *req;
    size_t i;
} row_call;

static void on_row(void *data, int status, redisReply *r)
{
    row_call *c = data;
    plat_req *p = c->req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_STRING) {
        p->row[c->i] = arena_alloc(&c->req->pool, r->len + 1);
        if (p->row[c->i]) {
            memcpy(p->row[c->i], r->str, r->len);
            p->row_len[c->i] = r->len;
        }
    }
    if (--p->pending == 0)
        page_send(c->req);
}

static void on_page(void *data, int status, redisReply *r)
{
    request *req = data;
    plat_req *p = req->state;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_ARRAY, "whp_deliveries: unexpected reply"))
        return;
    if (r->elements < 1) {
        request_fail_internal(req, "whp_deliveries: unexpected reply");
        return;
    }
    p->rows = r->elements - 1;
    p->row = arena_alloc(&req->pool, (p->rows + 1) * sizeof *p->row);
    p->row_len = arena_alloc(&req->pool, (p->rows + 1) * sizeof *p->row_len);
    row_call *calls = arena_alloc(&req->pool, (p->rows + 1) * sizeof *calls);
    if (!p->row || !p->row_len || !calls) {
        request_fail_internal(req, "platform deliveries: out of memory");
        return;
    }
    const redisReply *next = r->element[p->rows];
    size_t nlen = next->type == REDIS_REPLY_STRING ? next->len : 0;
    p->next = arena_alloc(&req->pool, nlen + 1);
    if (!p->next) {
        request_fail_internal(req, "platform deliveries: out of memory");
        return;
    }
    memcpy(p->next, nlen ? next->str : "", nlen);
    p->next[nlen] = '\0';
    p->pending = 1;
    for (size_t i = 0; i < p->rows; i++) {
        const redisReply *id = r->element[i];
        char eid[IDS_SIZE], log[KEYS_WEBHOOK_SIZE];
        p->row[i] = NULL;
        if (id->type != REDIS_REPLY_STRING || !did_parse(id->str, id->len, eid))
            continue;
        keys_webhook(log, eid, p->wid, ":log");
        calls[i].req = req;
        calls[i].i = i;
        const char *argv[] = {"HGET", log, id->str};
        size_t lens[] = {4, strlen(log), id->len};
        p->pending++;
        store_command(req->app->store, on_row, &calls[i], 3, argv, lens);
    }
    if (--p->pending == 0)
        page_send(req);
}

static void deliveries_page(request *req)
{
    plat_req *p = req->state;
    char recent[KEYS_WEBHOOK_SIZE];
    keys_webhook_platform(recent, p->wid, ":recent");
    const char *argv[] = {recent, p->lim, p->cursor};
    size_t lens[] = {strlen(recent), strlen(p->lim), strlen(p->cursor)};
    store_script(req->app->store, LUA_WHP_DELIVERIES, on_page, req, 1, 3, argv, lens);
}

void webhook_platform_deliveries_get(request *req)
{
    plat_req *p = plat_open(req);
    long limit;
    if (!p || !reads_limit(req, 100, 20, &limit))
        return;
    size_t clen = 0;
    const char *cursor = request_param(req, "cursor", &clen);
    char eid[IDS_SIZE];
    if (clen && !did_parse(cursor, clen, eid)) {
        request_fail_field(req, "cursor", "cursor must be a delivery id from the page before.");
        return;
    }
    p->cursor = clen ? cursor : "";
    buf_format_int(p->lim, limit);
    endpoint_exists(req, p, deliveries_page);
}

/* ---- POST /api/webhooks/{wid}/deliveries/{did}/retry ---- */

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

static void retry_send(request *req)
{
    plat_req *p = req->state;
    /* the holder of the endpoint's lease, on any instance, takes from this entity at its next
     * pass (keys.h, whp:{<wid>}:wake); sent first, so it never misses the delivery due */
    char wake[KEYS_WEBHOOK_SIZE];
    keys_webhook_platform(wake, p->wid, ":wake");
    const char *zargv[] = {"ZADD", wake, "0", p->eid};
    size_t zlens[] = {4, strlen(wake), 1, strlen(p->eid)};
    store_command(req->app->store, on_ignored, NULL, 4, zargv, zlens);
    entity_write w;
    entity_write_fill(req, p->eid, isotime_now_ms(), &w);
    char hooks[KEYS_ENTITY_SIZE], wh[KEYS_WEBHOOK_SIZE];
    keys_webhooks(hooks, p->eid);
    keys_webhook(wh, p->eid, p->wid, "");
    const char *head[] = {w.k.entity, w.k.owners, w.k.admins, hooks,    wh, req->caller,
                          "1",        p->wid,     p->did,     w.ev.max, "p"};
    entity_script(req, LUA_WH_RETRY, webhook_deliveries_retried, 5, head,
                  sizeof head / sizeof head[0], NULL, 0);
}

void webhook_platform_delivery_retry(request *req)
{
    plat_req *p = plat_open(req);
    if (!p)
        return;
    slice d = request_path_param(req, 1);
    if (!did_parse(d.s, d.len, p->eid)) {
        request_fail(req, 404, "not_found", "No such delivery.", NULL);
        return;
    }
    memcpy(p->did, d.s, d.len);
    p->did[d.len] = '\0';
    endpoint_exists(req, p, retry_send);
}

/* ---- POST /api/webhooks/{wid}/test ---- */

static void on_target(void *data, int status, redisReply *r)
{
    request *req = data;
    plat_req *p = req->state;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_ARRAY, "platform test: unexpected reply"))
        return;
    if (r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING) {
        request_fail(req, 404, "not_found", "No such webhook.", NULL);
        return;
    }
    const redisReply *sec = r->element[1];
    json_t *w = json_loadb(r->element[0]->str, r->element[0]->len, 0, NULL);
    const char *url = json_string_value(json_object_get(w, "url"));
    if (!json_is_true(json_object_get(w, "enabled")) || !url) {
        json_decref(w);
        request_fail(req, 409, "conflict", "The webhook is disabled: nothing is sent to it.", NULL);
        return;
    }
    int rc = webhooks_send_test(req->app->webhooks, "platform", p->wid, url,
                                sec->type == REDIS_REPLY_STRING ? sec->str : "",
                                sec->type == REDIS_REPLY_STRING ? sec->len : 0,
                                webhook_deliveries_tested, req);
    json_decref(w);
    if (rc != 0)
        request_fail(req, 503, "unavailable", "The test message could not be sent now.", NULL);
}

void webhook_platform_test_post(request *req)
{
    plat_req *p = plat_open(req);
    if (!p)
        return;
    char sec[WEBHOOK_ID_SIZE + 8];
    snprintf(sec, sizeof sec, "sec:%s", p->wid);
    const char *argv[] = {"HMGET", KEYS_WEBHOOKS_PLATFORM, p->wid, sec};
    size_t lens[] = {5, strlen(KEYS_WEBHOOKS_PLATFORM), strlen(p->wid), strlen(sec)};
    store_command(req->app->store, on_target, req, 4, argv, lens);
}
