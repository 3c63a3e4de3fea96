/* skills: an entity's skill tree: list skills and levels, add one skill or several, update or
 * delete one. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/app.h"
#include "auth/auth.h"
#include "resources/entity.h"
#include "resources/handlers.h"
#include "resources/skilltree_compat.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "redis/keys.h"
#include "api/listfield.h"
#include "resources/reads.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"
#include "cache/readcache.h"
#include "jobs/sweeper.h"

/* ---- GET /api/skills?entityID= ---- */

static void append_list(buf *b, const redisReply *list)
{
    buf_append(b, "[", 1);
    for (size_t i = 0; i < list->elements; i++) {
        if (i)
            buf_append(b, ",", 1);
        respond_append(b, list->element[i]);
    }
    buf_append(b, "]", 1);
}

/* A skills read on its way: the entity, and the ticket under which a gated read's answer may
 * be kept as the plain read's (send_skills_gated). */
typedef struct skills_read {
    const char *id;
    bool seed;
    readcache_ticket ticket;
} skills_read;

/* The plain read: {id, isEnabled, public, skilltree} of the entity hash, the same bytes for
 * every caller. */
static const char *const tree_fields[] = {"id", "isEnabled", "public", "skilltree"};
static const size_t tree_flens[] = {2, 9, 6, 9};
#define TREE_ARGC 6

static void tree_argv(const entity_keys *k, const char *argv[TREE_ARGC], size_t lens[TREE_ARGC])
{
    argv[0] = "HMGET";
    lens[0] = 5;
    argv[1] = k->entity;
    lens[1] = k->entity_len;
    for (int i = 0; i < 4; i++) {
        argv[2 + i] = tree_fields[i];
        lens[2 + i] = tree_flens[i];
    }
}

/* The plain read's answer says the entity exists, is public and enabled: open to every signed
 * caller, so its answer depends on no caller. */
static bool tree_open(const redisReply *f)
{
    return f && f->type == REDIS_REPLY_ARRAY && f->elements == 4 &&
           f->element[0]->type == REDIS_REPLY_STRING && f->element[0]->len > 0 &&
           entity_flag(f->element[1]) && entity_flag(f->element[2]);
}

/* {id, isEnabled, public, skilltree} of the entity hash; skilltree is
 * '"skills":[…],"levels":[…]', absent until the first skill. */
static void send_skills(request *req, const redisReply *f)
{
    if (f->elements != 4 ||
        (f->element[3]->type != REDIS_REPLY_STRING && f->element[3]->type != REDIS_REPLY_NIL)) {
        request_fail_internal(req, "skills read: unexpected reply");
        return;
    }
    static const char empty[] = "\"skills\":[],\"levels\":[]";
    slice tree = f->element[3]->type == REDIS_REPLY_STRING
                     ? (slice){f->element[3]->str, f->element[3]->len}
                     : (slice){empty, sizeof empty - 1};
    tree = skilltree_compat(&req->pool, tree);
    static const char head[] = "{\"success\":true,\"data\":{\"entityID\":\"";
    static const char mid[] = "\",";
    const skills_read *st = req->state;
    slice parts[5] = {
        {head, sizeof head - 1}, {st->id, IDS_SIZE - 1}, {mid, sizeof mid - 1}, tree, {"}}", 2}};
    request_reply_parts(req, 200, parts, 5);
}

/* The gated read: {the HMGET, the role lookups}, the tree only where the caller may read it.
 * An entity found public and enabled has its HMGET kept as the plain read's answer, for every
 * caller after this one. */
static void on_skills_read(void *data, int status, redisReply *r)
{
    request *req = data;
    const redisReply *f;
    if (entity_read_gated(req, status, r, false, &f) != ENTITY_READ_OK)
        return;
    skills_read *st = req->state;
    bool seed = st->seed && tree_open(f);
    readcache_ticket ticket = st->ticket;
    entity_keys k;
    keys_entity(&k, st->id);
    store *db = req->app->store;
    send_skills(req, f); /* first: keeping may drop the cache entry f lives in */
    if (seed) {
        const char *argv[TREE_ARGC];
        size_t lens[TREE_ARGC];
        tree_argv(&k, argv, lens);
        store_read_keep(db, &ticket, TREE_ARGC, argv, lens, f);
    }
}

/* One gated read with the caller's role lookups (entity.h): a skill tree can be megabytes, so
 * the tree of an entity that is not public leaves Redis only for a caller who may read it, and
 * a private entity is one round trip too. Through the read cache, one entry per caller and
 * entity (as progress and the leaderboards), under a key of about a hundred bytes. */
static void send_skills_gated(request *req, bool seed)
{
    skills_read *st = req->state;
    entity_keys k;
    keys_entity(&k, st->id);
    entity_gate g;
    store_cmd cmd;
    entity_gate_init(&g, req, &k, 'r', 4, tree_fields, tree_flens);
    if (!entity_gate_cmd(&g, req, &cmd))
        return;
    st->seed = seed;
    if (seed) {
        const char *argv[TREE_ARGC];
        size_t lens[TREE_ARGC];
        tree_argv(&k, argv, lens);
        store_read_ticket(req->app->store, &st->ticket, TREE_ARGC, argv, lens);
    }
    reads_desc d = {1, {'K'}};
    reads_desc_add(&d, st->id, IDS_SIZE - 1);
    reads_desc_add(&d, req->caller, strlen(req->caller));
    store_read_exec_as(req->app->store, request_read_flags(req), d.s, d.len, on_skills_read, req, 1,
                       &cmd);
}

/* The plain read of an entity known open: its flags are judged again, and a private or
 * disabled entity (changed since) goes through the gate after all. */
static void on_skills_plain(void *data, int status, redisReply *r)
{
    request *req = data;
    entity_read e = entity_read_fields(req, status, r, false);
    if (e == ENTITY_READ_OK)
        send_skills(req, r);
    else if (e == ENTITY_READ_ASK_ROLES)
        send_skills_gated(req, false);
}

/* An entity the read cache knows public and enabled (the plain read's own answer, kept while
 * Redis has not said the entity changed) is read as before the gate: one plain HMGET, the same
 * bytes for every caller, kept once in the read cache for all of them. Any other (unknown,
 * private, disabled) goes through the gate, so a stranger's refusal still costs the gate's
 * few dozen bytes. */
static void send_skills_read(request *req)
{
    const skills_read *st = req->state;
    entity_keys k;
    keys_entity(&k, st->id);
    const char *argv[TREE_ARGC];
    size_t lens[TREE_ARGC];
    tree_argv(&k, argv, lens);
    if (req->signed_in && tree_open(store_read_peek(req->app->store, TREE_ARGC, argv, lens))) {
        store_read(req->app->store, request_read_flags(req), on_skills_plain, req, TREE_ARGC, argv,
                   lens);
        return;
    }
    send_skills_gated(req, req->signed_in);
}

void skills_get(request *req)
{
    size_t len;
    const char *id = request_param(req, "entityID", &len);
    if (!id || !ids_valid(id, len, 'c')) {
        request_fail_field(req, "entityID",
                           "entityID must be an entity id (c- followed by a lowercase UUIDv4).");
        return;
    }
    skills_read *st = request_state(req, sizeof *st);
    if (!st)
        return;
    st->id = id; /* the decoded parameter lives in the request arena */
    send_skills_read(req);
}

/* ---- POST /api/skills (one, or several) ---- */

typedef struct add_state {
    bool many;
    /* which skills have a description: the field a skill tree past its budget names */
    bool described[100];
} add_state;

/* 'TREE <i> <message>' from skills_add.lua: skill i would take the skill tree past
 * SKILLTREE_MAX_BYTES. The field at fault is its description, or its name when it has none. */
static void fail_tree(request *req, const add_state *st, const char *rest)
{
    char *end;
    unsigned long i = strtoul(rest, &end, 10);
    bool d = i < 100 && st->described[i];
    char field[40], message[300];
    if (st->many)
        snprintf(field, sizeof field, "%s[%lu]", d ? "descriptions" : "names", i);
    else
        snprintf(field, sizeof field, "%s", d ? "description" : "name");
    snprintf(message, sizeof message, "%s %s", field, *end == ' ' ? end + 1 : "is too large.");
    request_fail(req, 409, "conflict", message, field);
}

static void on_skills_added(void *data, int status, redisReply *r)
{
    request *req = data;
    add_state *st = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "TREE ", 5)) {
        fail_tree(req, st, r->str + 5);
        return;
    }
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        request_fail_internal(req, "skills_add: unexpected reply");
        return;
    }
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":");
    if (st->many) {
        append_list(b, r);
    } else {
        respond_append(b, r->element[0]);
    }
    buf_append(b, "}", 1);
    respond_send(req, 201, b);
}

/* A parent as a body gives it (CONTRACT section 15): a skill id, or null (or absent) for a
 * root. Writes the id, or "" for a root, into out. Returns 0, or -1 with e naming field. */
static int read_parent(json_t *v, const char *field, char out[IDS_SIZE], verr *e)
{
    out[0] = '\0';
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v) && ids_valid(json_string_value(v), json_string_length(v), 's')) {
        memcpy(out, json_string_value(v), IDS_SIZE);
        return 0;
    }
    snprintf(e->field, sizeof e->field, "%s", field);
    snprintf(e->message, sizeof e->message,
             "%s must be a skill id (s- followed by a lowercase UUIDv4) or null.", field);
    return -1;
}

/* parentIds in any form names takes, as many as the names, into a new array; absent: every
 * skill a root (an array of nulls). */
static json_t *read_parents(json_t *body, size_t count, verr *e)
{
    json_t *p = json_object_get(body, "parentIds");
    if (!p || json_is_null(p)) {
        json_t *roots = json_array();
        for (size_t i = 0; roots && i < count; i++)
            json_array_append_new(roots, json_null());
        return roots;
    }
    json_t *list = listfield_array(p, "parentIds", false, e);
    if (list && json_array_size(list) != count) {
        json_decref(list);
        snprintf(e->field, sizeof e->field, "parentIds");
        snprintf(e->message, sizeof e->message, "parentIds must hold as many items as names.");
        return NULL;
    }
    return list;
}

/* Reads names (and descriptions) in any accepted form into new arrays. */
static int read_many(json_t *body, json_t **names, json_t **descs, verr *e)
{
    json_t *n = json_object_get(body, "names");
    if (!n) {
        snprintf(e->field, sizeof e->field, "names");
        snprintf(e->message, sizeof e->message, "names is required.");
        return -1;
    }
    if (!(*names = listfield_array(n, "names", false, e)))
        return -1;
    size_t count = json_array_size(*names);
    if (count < 1 || count > 100) {
        snprintf(e->field, sizeof e->field, "names");
        snprintf(e->message, sizeof e->message, "names must hold 1 to 100 names.");
        return -1;
    }
    json_t *d = json_object_get(body, "descriptions");
    if (!d) {
        *descs = json_array();
        for (size_t i = 0; i < count; i++)
            json_array_append_new(*descs, json_string(""));
        return 0;
    }
    if (!(*descs = listfield_array(d, "descriptions", false, e)))
        return -1;
    if (json_array_size(*descs) != count) {
        snprintf(e->field, sizeof e->field, "descriptions");
        snprintf(e->message, sizeof e->message, "descriptions must hold as many items as names.");
        return -1;
    }
    return 0;
}

/* The arguments skills_add.lua and skill_update.lua both begin with: the entity's keys
 * entity, owners, admins, skills, skill order, skill names and level order, then the caller
 * and whether it is a platform admin. */
#define SKILL_KEYS 7
#define SKILL_HEAD (SKILL_KEYS + 2)

static void skill_head(request *req, const entity_keys *k, const char **out)
{
    const char *head[SKILL_HEAD] = {
        k->entity,
        k->owners,
        k->admins,
        k->skills,
        k->skill_order,
        k->skill_names,
        k->level_order,
        req->caller,
        auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0"};
    memcpy(out, head, sizeof head);
}

/* skills_add.lua's arguments before the per-skill quadruples: that head, the time, the events'
 * limits, the time as ISO, MAX_SKILLS_PER_ENTITY, SKILLTREE_MAX_BYTES and whether the request
 * was for several skills. */
#define SKILLS_HEAD (SKILL_HEAD + 6)
#define SKILL_ARGS  4

static void add_skills(request *req, bool many)
{
    add_state *st = arena_alloc(&req->pool, sizeof *st);
    json_t *body = validate_body(req);
    if (!body || !st) {
        json_decref(body);
        if (!st)
            request_fail_internal(req, "out of memory");
        return;
    }
    req->state = st;
    verr e;
    json_t *names = NULL, *descs = NULL, *parents = NULL;
    if (!many && !json_object_get(body, "name") && json_object_get(body, "names"))
        many = true;
    st->many = many;
    json_t *eid = json_object_get(body, "entityID");
    if (!json_is_string(eid) || !ids_valid(json_string_value(eid), json_string_length(eid), 'c')) {
        json_decref(body);
        request_fail_field(req, "entityID",
                           "entityID must be an entity id (c- followed by a lowercase UUIDv4).");
        return;
    }
    if (req->api_key_entity[0] && strcmp(req->api_key_entity, json_string_value(eid)) != 0) {
        /* The entity is named only here, in the body: the key's own entity is judged now. */
        json_decref(body);
        request_fail(req, 403, "forbidden", "An API key acts only on its own entity.", NULL);
        return;
    }
    int rc;
    if (many) {
        rc = read_many(body, &names, &descs, &e);
    } else {
        names = json_array();
        descs = json_array();
        json_t *n = json_object_get(body, "name"), *d = json_object_get(body, "description");
        rc = 0;
        if (!n) {
            snprintf(e.field, sizeof e.field, "name");
            snprintf(e.message, sizeof e.message, "name is required.");
            rc = -1;
        }
        json_array_append(names, n ? n : json_null());
        if (d)
            json_array_append(descs, d);
        else
            json_array_append_new(descs, json_string(""));
        parents = json_array();
        json_t *p = json_object_get(body, "parentId");
        json_array_append(parents, p ? p : json_null());
    }
    if (rc == 0 && many && !(parents = read_parents(body, json_array_size(names), &e)))
        rc = -1;
    char entity_id[IDS_SIZE];
    memcpy(entity_id, json_string_value(eid), IDS_SIZE);
    char created[24], created_iso[ISOTIME_STRING_SIZE];
    int64_t now = isotime_now_ms();
    snprintf(created, sizeof created, "%lld", (long long)now);
    isotime_format(now, created_iso);

    size_t count = rc == 0 ? json_array_size(names) : 0;
    size_t argc = SKILLS_HEAD + SKILL_ARGS * count;
    const char **argv = arena_alloc(&req->pool, argc * sizeof *argv);
    size_t *lens = arena_alloc(&req->pool, argc * sizeof *lens);
    if (rc == 0 && (!argv || !lens)) {
        rc = -1;
        snprintf(e.field, sizeof e.field, "names");
        snprintf(e.message, sizeof e.message, "names is too large.");
    }
    for (size_t i = 0; rc == 0 && i < count; i++) {
        char fn[32], fd[40], fp[32];
        snprintf(fn, sizeof fn, many ? "names[%zu]" : "name", i);
        snprintf(fd, sizeof fd, many ? "descriptions[%zu]" : "description", i);
        snprintf(fp, sizeof fp, many ? "parentIds[%zu]" : "parentId", i);
        const char *name, *desc;
        size_t nlen, dlen;
        char *parent = arena_alloc(&req->pool, IDS_SIZE);
        if (!parent) {
            rc = -2;
            break;
        }
        if (validate_text_value(json_array_get(names, i), fn, TEXT_NAME, &name, &nlen, &e) ||
            validate_text_value(json_array_get(descs, i), fd, TEXT_DESCRIPTION, &desc, &dlen, &e) ||
            read_parent(json_array_get(parents, i), fp, parent, &e)) {
            rc = -1;
            break;
        }
        st->described[i] = dlen > 0;
        char *sid = arena_alloc(&req->pool, IDS_SIZE);
        char *norm = arena_strndup(&req->pool, name, nlen);
        if (!sid || !norm || ids_new(sid, 's') != 0) {
            rc = -2;
            break;
        }
        for (char *p = norm; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p + 32);
        /* The Skill exactly as the API returns it (reads copy it as is) but for its last fields,
         * parentId and depth, which skills_add.lua appends: the depth is the parent's, plus one. */
        buf rec = BUF_INIT;
        buf_append_str(&rec, "{\"id\":\"");
        buf_append_str(&rec, sid);
        buf_append_str(&rec, "\",\"entityID\":\"");
        buf_append_str(&rec, entity_id);
        buf_append_str(&rec, "\",\"name\":\"");
        buf_append_json_escaped(&rec, name, nlen);
        buf_append_str(&rec, "\",\"description\":\"");
        buf_append_json_escaped(&rec, desc, dlen);
        buf_append_str(&rec, "\",\"createdAt\":\"");
        buf_append_str(&rec, created_iso);
        buf_append_str(&rec, "\",\"createdBy\":\"");
        buf_append_str(&rec, req->caller);
        buf_append_str(&rec, "\"");
        char *stored = arena_strndup(&req->pool, buf_cstr(&rec), rec.len);
        buf_free(&rec);
        if (!stored) {
            rc = -2;
            break;
        }
        const char **at = argv + SKILLS_HEAD + SKILL_ARGS * i;
        at[0] = sid;
        at[1] = norm;
        at[2] = stored;
        at[3] = parent;
    }
    json_decref(names);
    json_decref(descs);
    json_decref(parents);
    json_decref(body);
    if (rc == -2) {
        request_fail_internal(req, "skills: out of memory");
        return;
    }
    if (rc != 0) {
        validate_fail(req, &e);
        return;
    }
    /* A duplicate inside the request is a conflict too; the script checks it again. */
    for (size_t i = 0; i < count; i++)
        for (size_t j = i + 1; j < count; j++)
            if (!strcmp(argv[SKILLS_HEAD + 1 + SKILL_ARGS * i],
                        argv[SKILLS_HEAD + 1 + SKILL_ARGS * j])) {
                request_fail(req, 409, "conflict", "Two skills in the request have one name.",
                             NULL);
                return;
            }
    entity_write w;
    entity_write_fill(req, entity_id, now, &w);
    char *limit = arena_alloc(&req->pool, 24), *tree_max = arena_alloc(&req->pool, 24);
    if (!limit || !tree_max) {
        request_fail_internal(req, "skills: out of memory");
        return;
    }
    snprintf(limit, 24, "%lld", (long long)req->app->cfg.max_skills_per_entity);
    snprintf(tree_max, 24, "%lld", (long long)req->app->cfg.skilltree_max_bytes);
    skill_head(req, &w.k, argv);
    const char *rest[SKILLS_HEAD - SKILL_HEAD] = {
        arena_strndup(&req->pool, created, strlen(created)),
        arena_strndup(&req->pool, w.ev.max, strlen(w.ev.max)),
        arena_strndup(&req->pool, created_iso, strlen(created_iso)),
        limit,
        tree_max,
        many ? "1" : "0"};
    memcpy(argv + SKILL_HEAD, rest, sizeof rest);
    for (size_t i = 0; i < argc; i++)
        lens[i] = argv[i] ? strlen(argv[i]) : 0;
    store_script(req->app->store, LUA_SKILLS_ADD, on_skills_added, req, SKILL_KEYS, (int)argc, argv,
                 lens);
}

void skills_post(request *req)
{
    size_t len;
    const char *m = request_param(req, "multiple", &len);
    add_skills(req, m && !strcmp(m, "true"));
}

void skills_post_multiple(request *req)
{
    add_skills(req, true);
}

/* ---- POST /api/entities/{id}/skills/{skillId}/update, DELETE …/skills/{skillId} ---- */

/* A move or a deletion may have started a rebuild of the boards above it (CONTRACT section 15):
 * the entity is listed for the sweeper, which takes the rebuild's steps, after the answer (an
 * index write only once the script let the caller in), and looked for soon. */
static void note_rebuild(request *req, const char *eid)
{
    sweeper_note_waiting(req->app->sweeper, eid);
    sweeper_kick(req->app->sweeper);
}

static void on_skill_updated(void *data, int status, redisReply *r)
{
    request *req = data;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_STRING, "skill_update: unexpected reply"))
        return;
    if (req->state) /* the entity of a move */
        note_rebuild(req, req->state);
    buf *b = respond_scratch();
    buf_append_str(b, "{\"success\":true,\"data\":");
    respond_append(b, r);
    buf_append(b, "}", 1);
    respond_send(req, 200, b);
}

/* A JSON string literal of s in the pool, or NULL. */
static char *pool_json_string(request *req, const char *s, size_t n)
{
    buf b = BUF_INIT;
    buf_append(&b, "\"", 1);
    buf_append_json_escaped(&b, s, n);
    buf_append(&b, "\"", 1);
    char *out = arena_strndup(&req->pool, buf_cstr(&b), b.len);
    buf_free(&b);
    return out;
}

void skill_update(request *req)
{
    char eid[IDS_SIZE], sid[IDS_SIZE];
    if (!entity_path_part(req, eid, 's', sid))
        return;
    json_t *body = validate_body(req);
    if (!body)
        return;
    verr e;
    const char *name = NULL, *desc = NULL;
    size_t nlen = 0, dlen = 0;
    int has_name = validate_text(body, "name", false, TEXT_NAME, &name, &nlen, &e);
    int has_desc = has_name < 0 ? 0
                                : validate_text(body, "description", false, TEXT_DESCRIPTION, &desc,
                                                &dlen, &e);
    /* parentId: a new parent, or null to make the skill a root; absent keeps the parent. */
    json_t *pv = json_object_get(body, "parentId");
    char parent[IDS_SIZE];
    int has_parent = has_name < 0 || has_desc < 0 ? 0 : pv ? 1 : 0;
    if (has_parent && read_parent(pv, "parentId", parent, &e))
        has_parent = -1;
    if (has_name < 0 || has_desc < 0 || has_parent < 0) {
        json_decref(body);
        validate_fail(req, &e);
        return;
    }
    if (!has_name && !has_desc && !has_parent) {
        json_decref(body);
        request_fail_field(req, "name", "Give name, description, parentId or several of them.");
        return;
    }
    /* Copied out of the body before it goes: the name's JSON and its normalized form. */
    char *name_json = has_name ? pool_json_string(req, name, nlen) : "";
    char *norm = has_name ? arena_strndup(&req->pool, name, nlen) : "";
    char *desc_json = has_desc ? pool_json_string(req, desc, dlen) : "";
    json_decref(body);
    if (!name_json || !norm || !desc_json) {
        request_fail_internal(req, "skills: out of memory");
        return;
    }
    for (char *p = norm; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p + 32);
    if (has_parent) {
        char *held = request_state(req, IDS_SIZE);
        if (!held)
            return;
        memcpy(held, eid, IDS_SIZE);
    }
    entity_write w;
    entity_write_fill(req, eid, isotime_now_ms(), &w);
    char tree_max[24];
    snprintf(tree_max, sizeof tree_max, "%lld", (long long)req->app->cfg.skilltree_max_bytes);
    const char *rest[] = {
        w.ev.max, w.ev.at,   sid,      name_json,
        norm,     desc_json, tree_max, !has_parent ? "" : parent[0] ? parent : "null"};
    const char *head[SKILL_HEAD + sizeof rest / sizeof rest[0]];
    skill_head(req, &w.k, head);
    memcpy(head + SKILL_HEAD, rest, sizeof rest);
    entity_script(req, LUA_SKILL_UPDATE, on_skill_updated, SKILL_KEYS, head,
                  sizeof head / sizeof head[0], NULL, 0);
}

static void on_skill_deleted(void *data, int status, redisReply *r)
{
    request *req = data;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_INTEGER, "skill_delete: unexpected reply"))
        return;
    /* The board was unlinked inside the script, which knew its name only from the path. */
    readcache *rc = req->app->reads;
    if (rc && readcache_enabled(rc)) {
        char key[KEYS_BOARD_SIZE];
        const char *const *ids = req->state;
        readcache_invalidate(rc, key, keys_board(key, ids[0], ids[1]));
    }
    note_rebuild(req, ((const char *const *)req->state)[0]);
    respond_deleted(req);
}

void skill_delete(request *req)
{
    char eid[IDS_SIZE], sid[IDS_SIZE];
    if (!entity_path_part(req, eid, 's', sid))
        return;
    const char **ids = request_state(req, 2 * sizeof *ids);
    if (!ids)
        return;
    ids[0] = arena_strndup(&req->pool, eid, strlen(eid));
    ids[1] = arena_strndup(&req->pool, sid, strlen(sid));
    if (!ids[0] || !ids[1]) {
        request_fail_internal(req, "skills: out of memory");
        return;
    }
    entity_write w;
    entity_write_fill(req, eid, isotime_now_ms(), &w);
    const char *head[] = {w.k.entity,
                          w.k.owners,
                          w.k.admins,
                          w.k.skills,
                          w.k.skill_order,
                          w.k.skill_names,
                          w.k.levels,
                          w.k.level_order,
                          req->caller,
                          auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
                          w.ev.max,
                          w.ev.at,
                          sid};
    entity_script(req, LUA_SKILL_DELETE, on_skill_deleted, 8, head, sizeof head / sizeof head[0],
                  NULL, 0);
}
