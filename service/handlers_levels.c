/* handlers_levels: create or replace a level of an entity's skill tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "auth.h"
#include "handlers.h"
#include "ids.h"
#include "isotime.h"
#include "keys.h"
#include "listfield.h"
#include "lua_scripts.h"
#include "reply.h"
#include "skilltree.h"
#include "store.h"
#include "validate.h"

#define XP_MAX           9007199254740991LL /* 2^53 - 1: exact in a JSON number */
#define LEVEL_MAX_SKILLS 100

typedef struct level_state {
    char entity_id[IDS_SIZE];
} level_state;

static void on_level(void *data, int status, redisReply *r)
{
    request *req = data;
    level_state *st = req->state;
    if (reply_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        request_fail_internal(req, "level_upsert: unexpected reply");
        return;
    }
    json_t *level = skilltree_level_json(r->element[1], st->entity_id);
    if (!level) {
        request_fail_internal(req, "level_upsert: malformed record");
        return;
    }
    bool created = r->element[0]->integer == 1;
    json_t *out = reply_ok();
    json_object_set_new(out, "data", level);
    json_object_set_new(out, "created", json_boolean(created));
    request_reply(req, created ? 201 : 200, out);
}

static int fail(verr *e, const char *field, const char *message)
{
    snprintf(e->field, sizeof e->field, "%s", field);
    snprintf(e->message, sizeof e->message, "%s %s", field, message);
    return -1;
}

/* Validates the body into the stored record (strings only) and the skill ids to check. */
static int read_level(request *req, json_t *body, const char *lvid, json_t **rec,
                      json_t **skill_ids, int64_t *xp, verr *e)
{
    const char *name, *desc;
    size_t nlen, dlen;
    if (validate_text(body, "name", true, TEXT_NAME, &name, &nlen, e) < 0)
        return -1;
    int has_desc = validate_text(body, "description", false, TEXT_DESCRIPTION, &desc, &dlen, e);
    if (has_desc < 0)
        return -1;
    json_t *sv = json_object_get(body, "skillIds"), *cv = json_object_get(body, "scores");
    if (!sv)
        return fail(e, "skillIds", "is required.");
    if (!cv)
        return fail(e, "scores", "is required.");
    json_t *ids = listfield_array(sv, "skillIds", true, e);
    if (!ids)
        return -1;
    json_t *scores = listfield_array(cv, "scores", true, e);
    if (!scores) {
        json_decref(ids);
        return -1;
    }
    *skill_ids = ids;
    size_t n = json_array_size(ids);
    if (n > LEVEL_MAX_SKILLS) {
        json_decref(scores);
        return fail(e, "skillIds", "must hold at most 100 skill ids.");
    }
    if (json_array_size(scores) != n) {
        json_decref(scores);
        return fail(e, "scores", "must hold as many items as skillIds.");
    }
    json_t *out_scores = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *id = json_array_get(ids, i);
        char f[32];
        snprintf(f, sizeof f, "skillIds[%zu]", i);
        if (!json_is_string(id) || !ids_valid(json_string_value(id), json_string_length(id), 's')) {
            json_decref(scores);
            json_decref(out_scores);
            return fail(e, f, "must be a skill id (s- followed by a lowercase UUIDv4).");
        }
        int64_t v;
        if (listfield_uint(json_array_get(scores, i), "scores", i, XP_MAX, &v, e) != 0) {
            json_decref(scores);
            json_decref(out_scores);
            return -1;
        }
        char num[24];
        snprintf(num, sizeof num, "%lld", (long long)v);
        json_array_append_new(out_scores, json_string(num));
    }
    json_decref(scores);

    json_t *xv = json_object_get(body, "XP");
    int64_t x = -1;
    if (!xv) {
        json_decref(out_scores);
        return fail(e, "XP", "is required.");
    }
    if (json_is_integer(xv) || json_is_string(xv))
        if (listfield_uint(xv, "XP", 0, XP_MAX, &x, e) != 0)
            x = -1;
    if (x < 0) {
        json_decref(out_scores);
        return fail(e, "XP", "must be an integer from 0 to 9007199254740991 (number or string).");
    }
    *xp = x;

    char ends[24] = "";
    json_t *ev = json_object_get(body, "endsAt");
    bool has_ends = ev != NULL && !json_is_null(ev);
    if (has_ends) {
        int64_t ms;
        if (!json_is_string(ev) ||
            (json_string_length(ev) &&
             isotime_parse(json_string_value(ev), json_string_length(ev), &ms) != 0)) {
            json_decref(out_scores);
            return fail(e, "endsAt", "must be \"\" or an ISO 8601 date-time with a time zone.");
        }
        if (json_string_length(ev))
            snprintf(ends, sizeof ends, "%lld", (long long)ms);
    }
    char xps[24];
    snprintf(xps, sizeof xps, "%lld", (long long)x);
    *rec = json_object();
    json_object_set_new(*rec, "id", json_string(lvid));
    json_object_set_new(*rec, "name", json_stringn(name, nlen));
    if (has_desc)
        json_object_set_new(*rec, "description", json_stringn(desc, dlen));
    json_object_set(*rec, "skillIds", ids);
    json_object_set_new(*rec, "scores", out_scores);
    if (has_ends)
        json_object_set_new(*rec, "endsAt", json_string(ends));
    json_object_set_new(*rec, "XP", json_string(xps));
    (void)req;
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void level_update(request *req)
{
    slice eid = request_path_param(req, 0), lid = request_path_param(req, 1);
    if (!ids_valid(eid.s, eid.len, 'c') || !ids_valid_level(lid.s, lid.len)) {
        request_fail(req, 404, "not_found", "No such entity or level.", NULL);
        return;
    }
    level_state *st = arena_alloc(&req->pool, sizeof *st);
    char *lvid = arena_strndup(&req->pool, lid.s, lid.len);
    if (!st || !lvid) {
        request_fail_internal(req, "out of memory");
        return;
    }
    memcpy(st->entity_id, eid.s, eid.len);
    st->entity_id[eid.len] = '\0';
    req->state = st;
    json_t *body = validate_body(req);
    if (!body)
        return;
    json_t *rec = NULL, *ids = NULL;
    int64_t xp = 0;
    verr e;
    int rc = read_level(req, body, lvid, &rec, &ids, &xp, &e);
    json_decref(body);
    if (rc != 0) {
        json_decref(ids);
        validate_fail(req, &e);
        return;
    }
    char *text = json_dumps(rec, JSON_COMPACT);
    json_decref(rec);
    size_t n = json_array_size(ids);
    size_t argc = 12 + n;
    const char **argv = arena_alloc(&req->pool, argc * sizeof *argv);
    size_t *lens = arena_alloc(&req->pool, argc * sizeof *lens);
    char *stored = text ? arena_strndup(&req->pool, text, strlen(text)) : NULL;
    free(text);
    if (!argv || !lens || !stored) {
        json_decref(ids);
        request_fail_internal(req, "out of memory");
        return;
    }
    entity_keys k;
    keys_entity(&k, st->entity_id);
    char xps[24], now[24];
    snprintf(xps, sizeof xps, "%lld", (long long)xp);
    snprintf(now, sizeof now, "%lld", (long long)now_ms());
    const char *head[] = {
        k.entity,    k.owners,
        k.admins,    k.skills,
        k.levels,    k.level_order,
        req->caller, auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
        lvid,        xps,
        stored,      now};
    for (size_t i = 0; i < 12; i++)
        argv[i] = head[i];
    for (size_t i = 0; i < n; i++)
        argv[12 + i] = json_string_value(json_array_get(ids, i));
    for (size_t i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    store_script(req->app->store, LUA_LEVEL_UPSERT, on_level, req, 6, (int)argc, argv, lens);
    json_decref(ids); /* store_script copied the arguments */
}
