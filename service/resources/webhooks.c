/* webhooks: webhook endpoints (CONTRACT section 14), an entity's (its owners and admins, and
 * platform admins) under /api/entities/{id}/webhooks and the platform's (platform admins) under
 * /api/webhooks. The endpoint's JSON is rendered by the scripts alone (lua/_prelude.lua,
 * webhook_json); its secret is answered at creation and rotation, never stored elsewhere than
 * its sec:<wid> field (keys.h), never logged. Deliveries are push/'s. */
#include <nettle/base64.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "api/respond.h"
#include "api/validate.h"
#include "auth/auth.h"
#include "core/app.h"
#include "core/isotime.h"
#include "push/webhook.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/webhook_url.h"

/* CONTRACT section 14: past it a create is 409, per entity and for the platform. */
#define WEBHOOKS_MAX "10"
/* A description's characters: a line or two saying what the endpoint is for. */
#define WEBHOOK_DESCRIPTION_MAX 500
/* A rotated secret signs beside the new one this long. */
#define WEBHOOK_ROTATE_KEEP_MS "86400000"
/* "wh-" + UUIDv4 + NUL */
#define WEBHOOK_ID_SIZE      40
#define WEBHOOK_SECRET_BYTES 32
#define WEBHOOK_SECRET_SIZE  (6 + BASE64_ENCODE_RAW_LENGTH(WEBHOOK_SECRET_BYTES) + 1)

/* The event types an endpoint may subscribe to (CONTRACT sections 5, 8, 14, 15, 16). */
static const char *const webhook_types[] = {
    "admin.added",    "admin.removed",     "contribution.added", "contribution.revoked",
    "entity.updated", "level.deleted",     "level.reached",      "level.updated",
    "member.added",   "member.left",       "member.removed",     "skill.added",
    "skill.deleted",  "skill.updated",     "webhook.disabled",   "member.joined",
    "member.lapsed",  "joinrules.updated", "skill.moved",        "apiKey.created",
    "apiKey.deleted"};
#define WEBHOOK_NTYPES (sizeof webhook_types / sizeof webhook_types[0])

/* One webhook request, from its opening to its answer (in the request's pool). */
typedef struct hook {
    bool platform; /* /api/webhooks…: no entity */
    char eid[IDS_SIZE];
    char wid[WEBHOOK_ID_SIZE];
    char entry[IDS_SIZE + WEBHOOK_ID_SIZE + 1]; /* the webhooks zset's "<entity|platform>:<wid>" */
    /* The body's fields, validated; NULL (enabled -1) when not given. */
    const char *url, *host, *events, *description;
    int enabled;
    char secret[WEBHOOK_SECRET_SIZE];
    /* A create's refusal, answered once its zset entry is gone. */
    redisReply refusal;
} hook;

static bool wid_valid(slice s)
{
    /* "wh-<uuid>": ids_valid judges "h-<uuid>" */
    return s.len == WEBHOOK_ID_SIZE - 1 && s.s[0] == 'w' && ids_valid(s.s + 1, s.len - 1, 'h');
}

/* Opens a webhook route: a platform one refuses all but platform admins here, before anything
 * is read (CONTRACT §12); an entity's takes the entity id from the path, its own gate asked in
 * Redis later. with_wid: the endpoint id follows in the path. NULL once answered. */
static hook *hook_open(request *req, bool platform, bool with_wid)
{
    hook *h = request_state(req, sizeof *h);
    if (!h)
        return NULL;
    h->platform = platform;
    h->enabled = -1;
    if (platform) {
        if (!auth_is_platform_admin(req->app->auth, req->caller)) {
            request_fail(req, 403, "forbidden",
                         "Only platform admins may manage platform webhooks.", NULL);
            return NULL;
        }
    } else if (!entity_path_id(req, h->eid)) {
        return NULL;
    }
    if (with_wid) {
        slice w = request_path_param(req, platform ? 0 : 1);
        if (!wid_valid(w)) {
            request_fail(req, 404, "not_found", "No such webhook endpoint.", NULL);
            return NULL;
        }
        memcpy(h->wid, w.s, w.len);
        h->wid[w.len] = '\0';
    }
    return h;
}

/* ---- the body ---- */

/* events: absent, null or [] all types; else each a known type, once. Writes the JSON array
 * text into the pool (*out), or answers 400. */
static bool parse_events(request *req, json_t *v, const char **out)
{
    if (!json_is_array(v)) {
        request_fail_field(req, "events", "events must be an array of event types.");
        return false;
    }
    bool seen[WEBHOOK_NTYPES] = {0};
    json_t *list = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(v, i, t)
    {
        size_t k = 0;
        while (json_is_string(t) && k < WEBHOOK_NTYPES &&
               strcmp(json_string_value(t), webhook_types[k]))
            k++;
        if (!json_is_string(t) || k == WEBHOOK_NTYPES) {
            json_decref(list);
            char field[32];
            snprintf(field, sizeof field, "events[%zu]", i);
            request_fail_field(req, field, "Unknown event type.");
            return false;
        }
        if (!seen[k])
            json_array_append_new(list, json_string(webhook_types[k]));
        seen[k] = true;
    }
    char *text = json_dumps(list, JSON_COMPACT);
    json_decref(list);
    *out = text ? arena_strndup(&req->pool, text, strlen(text)) : NULL;
    free(text);
    if (!*out)
        request_fail_internal(req, "webhooks: out of memory");
    return *out != NULL;
}

/* The body's fields into h; false once answered (400, or 500 out of memory). */
static bool parse_fields(request *req, hook *h, json_t *body, bool create)
{
    verr e;
    json_t *url = json_object_get(body, "url"), *events = json_object_get(body, "events");
    const char *desc;
    size_t dlen;
    int has_desc = validate_text(body, "description", false, TEXT_DESCRIPTION, &desc, &dlen, &e);
    bool enabled = false;
    int has_enabled = create ? 0 : validate_bool(body, "enabled", &enabled, &e);
    if (has_desc < 0 || has_enabled < 0) {
        validate_fail(req, &e);
        return false;
    }
    if (has_desc && validate_utf8_chars(desc, dlen) > WEBHOOK_DESCRIPTION_MAX) {
        request_fail_field(req, "description", "description must be at most 500 characters.");
        return false;
    }
    if ((create && !url) || (url && !json_is_string(url))) {
        request_fail_field(req, "url", "url must be an absolute https URL.");
        return false;
    }
    const char *why = url ? webhook_url_parse(req, json_string_value(url), json_string_length(url),
                                              &h->url, &h->host)
                          : NULL;
    if (why) {
        request_fail_field(req, "url", why);
        return false;
    }
    if (events && !json_is_null(events) && !parse_events(req, events, &h->events))
        return false;
    if (create && !h->events)
        h->events = "[]";
    h->description = has_desc ? arena_strndup(&req->pool, desc, dlen) : create ? "" : NULL;
    if (has_desc && !h->description) {
        request_fail_internal(req, "webhooks: out of memory");
        return false;
    }
    if (has_enabled > 0)
        h->enabled = enabled;
    return true;
}

/* Reads the body's url, events, description (and, for an update, enabled) into h; a create
 * needs url. False once answered. Nothing is resolved here: the caller's right first. */
static bool parse_body(request *req, hook *h, bool create)
{
    json_t *body = validate_body(req);
    if (!body)
        return false;
    bool ok = parse_fields(req, h, body, create);
    json_decref(body);
    return ok;
}

/* ---- scripts and answers ---- */

/* Runs a webhook script on h's endpoints: keys the entity's (entity, owners, admins, webhooks;
 * a delete's also the endpoint's delivery keys) or webhooks:{platform}; arguments caller,
 * platform, then for writes the events' two, then own. */
static void run(request *req, int script, store_cb cb, const char *const *own, size_t nown)
{
    hook *h = req->state;
    entity_write w;
    char hooks[KEYS_ENTITY_SIZE], parts[4][KEYS_WEBHOOK_SIZE];
    static const char *const suffix[4] = {"", ":log", ":order", ":due"};
    const char *head[24];
    size_t n = 0;
    int64_t now = isotime_now_ms();
    if (h->platform) {
        entity_event_args_fill(req, now, &w.ev);
        head[n++] = KEYS_WEBHOOKS_PLATFORM;
    } else {
        entity_write_fill(req, h->eid, now, &w);
        keys_webhooks(hooks, h->eid);
        head[n++] = w.k.entity;
        head[n++] = w.k.owners;
        head[n++] = w.k.admins;
        head[n++] = hooks;
        for (size_t i = 0; script == LUA_WEBHOOK_DELETE && i < 4; i++) {
            keys_webhook(parts[i], h->eid, h->wid, suffix[i]);
            head[n++] = parts[i];
        }
    }
    int nkeys = (int)n;
    head[n++] = req->caller;
    head[n++] = auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0";
    if (script != LUA_WEBHOOKS_READ) {
        head[n++] = w.ev.max;
        head[n++] = w.ev.at;
    }
    for (size_t i = 0; i < nown && n < sizeof head / sizeof head[0]; i++)
        head[n++] = own[i];
    entity_script(req, script, cb, nkeys, head, n, NULL, 0);
}

/* Answers {"success":true,"data":<endpoint JSON>}, with the secret added when one is given. */
static void answer_endpoint(request *req, int status, const redisReply *json, const char *secret)
{
    static const char head[] = "{\"success\":true,\"data\":", mid[] = ",\"secret\":\"",
                      tail[] = "\"}}";
    if (json->len < 2 || json->str[json->len - 1] != '}') {
        request_fail_internal(req, "webhooks: unexpected endpoint record");
        return;
    }
    slice parts[5] = {{head, sizeof head - 1}, {json->str, json->len}, {"}", 1}};
    size_t n = 3;
    if (secret) {
        parts[1].len--; /* the record's closing brace: the secret goes inside */
        parts[2] = (slice){mid, sizeof mid - 1};
        parts[3] = (slice){secret, strlen(secret)};
        parts[4] = (slice){tail, sizeof tail - 1};
        n = 5;
    }
    request_reply_parts(req, status, parts, n);
}

/* A fresh secret into out; false (500 answered) when the system has no randomness to give. */
static bool new_secret(request *req, char out[WEBHOOK_SECRET_SIZE])
{
    uint8_t raw[WEBHOOK_SECRET_BYTES];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        request_fail_internal(req, "webhooks: no secret could be made");
        return false;
    }
    memcpy(out, "whsec_", 6);
    base64_encode_raw(out + 6, sizeof raw, raw);
    out[WEBHOOK_SECRET_SIZE - 1] = '\0';
    memset(raw, 0, sizeof raw);
    return true;
}

/* Answers the endpoint with h's secret; none is left in the request's memory, which the
 * answer may free (the answer holds its own copy). */
static void answer_secret(request *req, int status, const redisReply *json)
{
    hook *h = req->state;
    char secret[WEBHOOK_SECRET_SIZE];
    memcpy(secret, h->secret, sizeof secret);
    memset(h->secret, 0, sizeof h->secret);
    answer_endpoint(req, status, json, secret);
    memset(secret, 0, sizeof secret);
}

/* ---- create: POST /api/entities/{id}/webhooks, POST /api/webhooks ---- */

static void on_unlisted(void *data, int status, redisReply *r)
{
    (void)status, (void)r; /* an entry left behind names no endpoint: dropped after its grace */
    request *req = data;
    hook *h = req->state;
    respond_store_reply(req, STORE_OK, &h->refusal, REDIS_REPLY_STRING, "webhooks: refusal");
}

static void on_created(void *data, int status, redisReply *r)
{
    request *req = data;
    hook *h = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR) {
        /* Refused after the entry was added: it goes before the answer (CONTRACT §12). */
        h->refusal = (redisReply){.type = REDIS_REPLY_ERROR, .len = r->len};
        h->refusal.str = arena_strndup(&req->pool, r->str, r->len);
        memset(h->secret, 0, sizeof h->secret);
        if (!h->refusal.str) {
            request_fail_internal(req, "webhooks: out of memory");
            return;
        }
        const char *argv[] = {"ZREM", KEYS_WEBHOOKS_ALL, h->entry};
        size_t lens[] = {4, strlen(KEYS_WEBHOOKS_ALL), strlen(h->entry)};
        store_command(req->app->store, on_unlisted, req, 3, argv, lens);
        return;
    }
    if (status == STORE_OK && r && r->type == REDIS_REPLY_STRING) {
        webhooks_kick(req->app->webhooks); /* its first deliveries need not wait for a poll */
        answer_secret(req, 201, r);
        return;
    }
    memset(h->secret, 0, sizeof h->secret);
    respond_store_reply(req, status, r, REDIS_REPLY_STRING, "webhook_create: unexpected reply");
}

static void on_listed(void *data, int status, redisReply *r)
{
    request *req = data;
    hook *h = req->state;
    if (respond_store_failed(req, status, r))
        return;
    char max[8];
    snprintf(max, sizeof max, "%s", WEBHOOKS_MAX);
    const char *own[] = {h->wid, h->url, h->events, h->description, h->secret, max};
    run(req, LUA_WEBHOOK_CREATE, on_created, own, 6);
}

static void on_create_judged(request *req, const char *refusal)
{
    hook *h = req->state;
    if (refusal) {
        request_fail_field(req, "url", refusal);
        return;
    }
    char id[IDS_SIZE];
    if (ids_new(id, 'h') != 0) {
        request_fail_internal(req, "webhooks: no id could be made");
        return;
    }
    if (!new_secret(req, h->secret))
        return;
    snprintf(h->wid, sizeof h->wid, "w%s", id);
    snprintf(h->entry, sizeof h->entry, "%s:%s", h->platform ? "platform" : h->eid, h->wid);
    /* Listed BEFORE the endpoint is written (keys.h): an instance looking for endpoints to
     * lease never misses one; an entry whose endpoint never came is dropped after a grace. */
    const char *argv[] = {"ZADD", KEYS_WEBHOOKS_ALL, "0", h->entry};
    size_t lens[] = {4, strlen(KEYS_WEBHOOKS_ALL), 1, strlen(h->entry)};
    store_command(req->app->store, on_listed, req, 4, argv, lens);
}

static void on_create_gate(request *req, const redisReply *r)
{
    (void)r;
    hook *h = req->state;
    webhook_url_judge(req, h->host, on_create_judged);
}

static void create(request *req, bool platform)
{
    hook *h = hook_open(req, platform, false);
    if (!h || !parse_body(req, h, true))
        return;
    if (platform)
        webhook_url_judge(req, h->host, on_create_judged);
    else
        entity_check(req, h->eid, "staff", "", NULL, 0, on_create_gate);
}

void webhooks_post(request *req)
{
    create(req, false);
}

void webhooks_platform_post(request *req)
{
    create(req, true);
}

/* ---- update: POST …/webhooks/{wid}/update ---- */

static void on_updated(void *data, int status, redisReply *r)
{
    request *req = data;
    if (respond_store_reply(req, status, r, REDIS_REPLY_STRING,
                            "webhook_update: unexpected reply")) {
        webhooks_kick(req->app->webhooks); /* enabled again: delivering from where it stopped */
        answer_endpoint(req, 200, r, NULL);
    }
}

static void on_update_judged(request *req, const char *refusal)
{
    hook *h = req->state;
    if (refusal) {
        request_fail_field(req, "url", refusal);
        return;
    }
    json_t *changes = json_object();
    if (h->url)
        json_object_set_new(changes, "url", json_string(h->url));
    if (h->events)
        json_object_set_new(changes, "events", json_loads(h->events, 0, NULL));
    if (h->description)
        json_object_set_new(changes, "description", json_string(h->description));
    if (h->enabled >= 0)
        json_object_set_new(changes, "enabled", json_boolean(h->enabled));
    char *text = json_dumps(changes, JSON_COMPACT);
    json_decref(changes);
    const char *own[] = {h->wid, text ? text : ""};
    if (!text)
        request_fail_internal(req, "webhooks: out of memory");
    else
        run(req, LUA_WEBHOOK_UPDATE, on_updated, own, 2);
    free(text);
}

static void on_update_gate(request *req, const redisReply *r)
{
    (void)r;
    hook *h = req->state;
    if (h->host)
        webhook_url_judge(req, h->host, on_update_judged);
    else
        on_update_judged(req, NULL);
}

static void update(request *req, bool platform)
{
    hook *h = hook_open(req, platform, true);
    if (!h || !parse_body(req, h, false))
        return;
    if (platform)
        on_update_gate(req, NULL);
    else
        entity_check(req, h->eid, "staff", "", NULL, 0, on_update_gate);
}

void webhooks_update(request *req)
{
    update(req, false);
}

void webhooks_platform_update(request *req)
{
    update(req, true);
}

/* ---- DELETE …/webhooks/{wid} ---- */

static void on_deleted_unlisted(void *data, int status, redisReply *r)
{
    (void)status, (void)r; /* an entry left behind names no endpoint: dropped after its grace */
    respond_deleted(data);
}

static void on_deleted(void *data, int status, redisReply *r)
{
    request *req = data;
    hook *h = req->state;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_INTEGER,
                             "webhook_delete: unexpected reply"))
        return;
    /* Removed AFTER the endpoint is deleted (keys.h). */
    snprintf(h->entry, sizeof h->entry, "%s:%s", h->platform ? "platform" : h->eid, h->wid);
    const char *argv[] = {"ZREM", KEYS_WEBHOOKS_ALL, h->entry};
    size_t lens[] = {4, strlen(KEYS_WEBHOOKS_ALL), strlen(h->entry)};
    store_command(req->app->store, on_deleted_unlisted, req, 3, argv, lens);
}

static void delete_endpoint(request *req, bool platform)
{
    hook *h = hook_open(req, platform, true);
    if (h) {
        const char *own[] = {h->wid};
        run(req, LUA_WEBHOOK_DELETE, on_deleted, own, 1);
    }
}

void webhooks_delete(request *req)
{
    delete_endpoint(req, false);
}

void webhooks_platform_delete(request *req)
{
    delete_endpoint(req, true);
}

/* ---- POST …/webhooks/{wid}/rotate-secret ---- */

static void on_rotated(void *data, int status, redisReply *r)
{
    request *req = data;
    hook *h = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_STRING) {
        answer_secret(req, 200, r);
        return;
    }
    memset(h->secret, 0, sizeof h->secret);
    respond_store_reply(req, status, r, REDIS_REPLY_STRING, "webhook_rotate: unexpected reply");
}

static void rotate(request *req, bool platform)
{
    hook *h = hook_open(req, platform, true);
    if (!h || !new_secret(req, h->secret))
        return;
    char now[24];
    snprintf(now, sizeof now, "%lld", (long long)isotime_now_ms());
    const char *own[] = {h->wid, h->secret, now, WEBHOOK_ROTATE_KEEP_MS};
    run(req, LUA_WEBHOOK_ROTATE, on_rotated, own, 4);
}

void webhooks_rotate(request *req)
{
    rotate(req, false);
}

void webhooks_platform_rotate(request *req)
{
    rotate(req, true);
}

/* ---- GET …/webhooks, GET …/webhooks/{wid} ---- */

static void on_read(void *data, int status, redisReply *r)
{
    request *req = data;
    hook *h = req->state;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_ARRAY, "webhooks_read: unexpected reply"))
        return;
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING) {
            request_fail_internal(req, "webhooks_read: unexpected reply");
            return;
        }
    if (h->wid[0]) {
        if (r->elements != 1)
            request_fail_internal(req, "webhooks_read: unexpected reply");
        else
            answer_endpoint(req, 200, r->element[0], NULL);
        return;
    }
    static const char head[] = "{\"success\":true,\"data\":[";
    slice *parts = arena_alloc(&req->pool, (2 * r->elements + 2) * sizeof *parts);
    if (!parts) {
        request_fail_internal(req, "webhooks: out of memory");
        return;
    }
    size_t n = 0;
    parts[n++] = (slice){head, sizeof head - 1};
    for (size_t i = 0; i < r->elements; i++) {
        if (i)
            parts[n++] = (slice){",", 1};
        parts[n++] = (slice){r->element[i]->str, r->element[i]->len};
    }
    parts[n++] = (slice){"]}", 2};
    request_reply_parts(req, 200, parts, n);
}

static void read_endpoints(request *req, bool platform, bool one)
{
    hook *h = hook_open(req, platform, one);
    if (h) {
        const char *own[] = {h->wid};
        run(req, LUA_WEBHOOKS_READ, on_read, own, 1);
    }
}

void webhooks_get(request *req)
{
    read_endpoints(req, false, false);
}

void webhooks_get_one(request *req)
{
    read_endpoints(req, false, true);
}

void webhooks_platform_get(request *req)
{
    read_endpoints(req, true, false);
}

void webhooks_platform_get_one(request *req)
{
    read_endpoints(req, true, true);
}
