/* levels: create or replace a level of an entity's skill tree, or delete one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/app.h"
#include "auth/auth.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "redis/keys.h"
#include "api/listfield.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "api/validate.h"

#define XP_MAX             9007199254740991LL /* 2^53 - 1: exact in a JSON number */
#define LEVEL_MAX_SKILLS   100
#define LEVEL_MAX_REQUIRES 16
/* level_upsert.lua's arguments before the required level ids: 7 keys and 16 values. */
#define LEVEL_HEAD 23

/* A validated level body as the JSON pieces level_upsert.lua assembles. Empty `description`,
 * `ends_at` or `requires` means "keep the stored value" (or the default for a new level). */
typedef struct level_input {
    buf name, description, skill_ids, scores, ends_at, requires;
    char xp[24];
    json_t *ids;      /* the skill ids, for the script to check */
    json_t *required; /* the required level ids (NULL: none given), for the script to check */
} level_input;

static void input_free(level_input *in)
{
    buf_free(&in->name);
    buf_free(&in->description);
    buf_free(&in->skill_ids);
    buf_free(&in->scores);
    buf_free(&in->ends_at);
    buf_free(&in->requires);
    json_decref(in->ids);
    json_decref(in->required);
    in->ids = in->required = NULL;
}

static void on_level(void *data, int status, redisReply *r)
{
    request *req = data;
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_STRING) {
        request_fail_internal(req, "level_upsert: unexpected reply");
        return;
    }
    bool created = r->element[0]->integer == 1;
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":");
    respond_append(b, r->element[1]);
    buf_append_str(b, created ? ",\"created\":true}" : ",\"created\":false}");
    respond_send(req, created ? 201 : 200, b);
}

static int fail(verr *e, const char *field, const char *message)
{
    snprintf(e->field, sizeof e->field, "%s", field);
    snprintf(e->message, sizeof e->message, "%s %s", field, message);
    return -1;
}

static void json_string_to(buf *b, const char *s, size_t n)
{
    buf_append(b, "\"", 1);
    buf_append_json_escaped(b, s, n);
    buf_append(b, "\"", 1);
}

/* The optional `requires`: at most 16 distinct level ids, in the encodings of skillIds.
 * Whether each names a level of the entity, and whether they close a cycle, the script
 * judges. Returns 0 or -1 with e filled. */
static int read_requires(json_t *body, level_input *in, verr *e)
{
    json_t *rv = json_object_get(body, "requires");
    if (!rv)
        return 0;
    if (!(in->required = listfield_array(rv, "requires", true, e)))
        return -1;
    size_t n = json_array_size(in->required);
    if (n > LEVEL_MAX_REQUIRES)
        return fail(e, "requires", "must hold at most 16 level ids.");
    buf_append(&in->requires, "[", 1);
    for (size_t i = 0; i < n; i++) {
        json_t *id = json_array_get(in->required, i);
        if (!json_is_string(id) || !ids_valid_level(json_string_value(id), json_string_length(id)))
            return fail(e, "requires",
                        "must hold level ids (1 to 64 letters, digits, '_' or '-').");
        for (size_t j = 0; j < i; j++)
            if (json_equal(id, json_array_get(in->required, j)))
                return fail(e, "requires", "must not name a level twice.");
        if (i)
            buf_append(&in->requires, ",", 1);
        json_string_to(&in->requires, json_string_value(id), json_string_length(id));
    }
    buf_append(&in->requires, "]", 1);
    return 0;
}

/* Validates the body into `in`. Returns 0 or -1 with e filled. */
static int read_level(json_t *body, level_input *in, verr *e)
{
    const char *name, *desc;
    size_t nlen, dlen;
    if (validate_text(body, "name", true, TEXT_NAME, &name, &nlen, e) < 0)
        return -1;
    json_string_to(&in->name, name, nlen);
    int has_desc = validate_text(body, "description", false, TEXT_DESCRIPTION, &desc, &dlen, e);
    if (has_desc < 0)
        return -1;
    if (has_desc)
        json_string_to(&in->description, desc, dlen);

    json_t *sv = json_object_get(body, "skillIds"), *cv = json_object_get(body, "scores");
    if (!sv)
        return fail(e, "skillIds", "is required.");
    if (!cv)
        return fail(e, "scores", "is required.");
    if (!(in->ids = listfield_array(sv, "skillIds", true, e)))
        return -1;
    json_t *scores = listfield_array(cv, "scores", true, e);
    if (!scores)
        return -1;
    size_t n = json_array_size(in->ids);
    int rc = 0;
    if (n > LEVEL_MAX_SKILLS)
        rc = fail(e, "skillIds", "must hold at most 100 skill ids.");
    else if (json_array_size(scores) != n)
        rc = fail(e, "scores", "must hold as many items as skillIds.");
    buf_append(&in->skill_ids, "[", 1);
    buf_append(&in->scores, "[", 1);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *id = json_array_get(in->ids, i);
        char f[32];
        snprintf(f, sizeof f, "skillIds[%zu]", i);
        if (!json_is_string(id) || !ids_valid(json_string_value(id), json_string_length(id), 's')) {
            rc = fail(e, f, "must be a skill id (s- followed by a lowercase UUIDv4).");
            break;
        }
        int64_t v;
        if (listfield_uint(json_array_get(scores, i), "scores", i, XP_MAX, &v, e) != 0) {
            rc = -1;
            break;
        }
        if (i) {
            buf_append(&in->skill_ids, ",", 1);
            buf_append(&in->scores, ",", 1);
        }
        json_string_to(&in->skill_ids, json_string_value(id), json_string_length(id));
        buf_printf(&in->scores, "%lld", (long long)v);
    }
    json_decref(scores);
    if (rc)
        return -1;
    buf_append(&in->skill_ids, "]", 1);
    buf_append(&in->scores, "]", 1);

    json_t *xv = json_object_get(body, "XP");
    int64_t x = -1;
    if (!xv)
        return fail(e, "XP", "is required.");
    if ((json_is_integer(xv) || json_is_string(xv)) &&
        listfield_uint(xv, "XP", 0, XP_MAX, &x, e) != 0)
        x = -1;
    if (x < 0)
        return fail(e, "XP", "must be an integer from 0 to 9007199254740991 (number or string).");
    snprintf(in->xp, sizeof in->xp, "%lld", (long long)x);

    json_t *ev = json_object_get(body, "endsAt");
    if (ev && !json_is_null(ev)) {
        int64_t ms;
        /* An instant outside years 0000-9999 has no ISO form to store: refused, not clamped. */
        if (!json_is_string(ev) ||
            (json_string_length(ev) &&
             (isotime_parse(json_string_value(ev), json_string_length(ev), &ms) != 0 ||
              ms < ISOTIME_MIN_MS || ms > ISOTIME_MAX_MS)))
            return fail(e, "endsAt", "must be \"\" or an ISO 8601 date-time with a time zone.");
        if (json_string_length(ev)) {
            char iso[ISOTIME_STRING_SIZE];
            isotime_format(ms, iso);
            json_string_to(&in->ends_at, iso, strlen(iso));
        } else {
            buf_append_str(&in->ends_at, "null");
        }
    }
    return read_requires(body, in, e);
}

void level_update(request *req)
{
    char entity_id[IDS_SIZE], lvid[ENTITY_LEVEL_ID_SIZE];
    if (!entity_path_part(req, entity_id, 'l', lvid))
        return;
    json_t *body = validate_body(req);
    if (!body)
        return;
    level_input in = {BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT, "", NULL, NULL};
    verr e;
    if (read_level(body, &in, &e) != 0) {
        json_decref(body);
        input_free(&in);
        validate_fail(req, &e);
        return;
    }
    json_decref(body);
    size_t n = json_array_size(in.ids), nreq = json_array_size(in.required);
    size_t argc = LEVEL_HEAD + nreq + n;
    const char **argv = arena_alloc(&req->pool, argc * sizeof *argv);
    size_t *lens = arena_alloc(&req->pool, argc * sizeof *lens);
    if (!argv || !lens) {
        input_free(&in);
        request_fail_internal(req, "out of memory");
        return;
    }
    char now[ISOTIME_STRING_SIZE + 2];
    now[0] = '"';
    int64_t now_ms = isotime_now_ms();
    isotime_format(now_ms, now + 1);
    strcat(now, "\"");
    entity_write w;
    entity_write_fill(req, entity_id, now_ms, &w);
    char limit[24];
    snprintf(limit, sizeof limit, "%lld", (long long)req->app->cfg.max_levels_per_entity);
    char tree_max[24], nreq_s[8];
    snprintf(tree_max, sizeof tree_max, "%lld", (long long)req->app->cfg.skilltree_max_bytes);
    snprintf(nreq_s, sizeof nreq_s, "%zu", nreq);
    const char *head[] = {w.k.entity,
                          w.k.owners,
                          w.k.admins,
                          w.k.skills,
                          w.k.levels,
                          w.k.level_order,
                          w.k.skill_order,
                          req->caller,
                          auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
                          lvid,
                          in.xp,
                          entity_id,
                          buf_cstr(&in.name),
                          buf_cstr(&in.description),
                          buf_cstr(&in.skill_ids),
                          buf_cstr(&in.scores),
                          buf_cstr(&in.ends_at),
                          now,
                          w.ev.max,
                          limit,
                          tree_max,
                          buf_cstr(&in.requires),
                          nreq_s};
    for (size_t i = 0; i < LEVEL_HEAD; i++)
        argv[i] = head[i];
    for (size_t i = 0; i < nreq; i++)
        argv[LEVEL_HEAD + i] = json_string_value(json_array_get(in.required, i));
    for (size_t i = 0; i < n; i++)
        argv[LEVEL_HEAD + nreq + i] = json_string_value(json_array_get(in.ids, i));
    for (size_t i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    store_script(req->app->store, LUA_LEVEL_UPSERT, on_level, req, 7, (int)argc, argv, lens);
    input_free(&in); /* store_script copied the arguments */
}

/* ---- DELETE /api/entities/{id}/levels/{lvID} ---- */

static void on_level_deleted(void *data, int status, redisReply *r)
{
    request *req = data;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_INTEGER, "level_delete: unexpected reply"))
        return;
    respond_deleted(req);
}

void level_delete(request *req)
{
    char entity_id[IDS_SIZE], lvid[ENTITY_LEVEL_ID_SIZE];
    if (!entity_path_part(req, entity_id, 'l', lvid))
        return;
    entity_write w;
    entity_write_fill(req, entity_id, isotime_now_ms(), &w);
    const char *head[] = {w.k.entity,
                          w.k.owners,
                          w.k.admins,
                          w.k.levels,
                          w.k.level_order,
                          w.k.skill_order,
                          req->caller,
                          auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
                          w.ev.max,
                          w.ev.at,
                          lvid};
    entity_script(req, LUA_LEVEL_DELETE, on_level_deleted, 6, head, sizeof head / sizeof head[0],
                  NULL, 0);
}
