/* entities: read an entity (by id, or by alias: CONTRACT §9), create and update one, with its
 * alias claimed or released on the way. Its members are members.c's, its deletion
 * entity_delete.c's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/app.h"
#include "auth/auth.h"
#include "auth/limits.h"
#include "resources/entity.h"
#include "resources/findindex.h"
#include "resources/handlers.h"
#include "crypto/hex.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "api/respond.h"
#include "redis/store.h"

static bool is_platform(request *req)
{
    return auth_is_platform_admin(req->app->auth, req->caller);
}

/* ---- GET /api/entities/{id} ---- */

static void send_entity(request *req, int status, const redisReply *json)
{
    static const char head[] = "{\"success\":true,\"data\":";
    slice parts[4] = {{head, sizeof head - 1}};
    size_t n = 1 + entity_json_parts(json->str, json->len, parts + 1);
    parts[n++] = (slice){"}", 1};
    request_reply_parts(req, status, parts, n);
}

static void send_entity_read(request *req, bool roles);

/* HMGET json isEnabled public: unsigned, or signed with the role not asked for yet. */
static void on_entity_read(void *data, int status, redisReply *r)
{
    request *req = data;
    entity_read e = entity_read_fields(req, status, r, true);
    if (e == ENTITY_READ_OK)
        send_entity(req, 200, r->element[0]);
    else if (e == ENTITY_READ_ASK_ROLES)
        send_entity_read(req, true);
}

/* The gated read of {HMGET json isEnabled public, the role lookups}. */
static void on_entity_read_roles(void *data, int status, redisReply *r)
{
    request *req = data;
    const redisReply *f;
    if (entity_read_gated(req, status, r, true, &f) == ENTITY_READ_OK)
        send_entity(req, 200, f->element[0]);
}

static void send_entity_read(request *req, bool roles)
{
    entity_keys k;
    keys_entity(&k, req->state); /* the id, in the request arena */
    const char *argv[] = {"HMGET", k.entity, "json", "isEnabled", "public"};
    size_t lens[] = {5, k.entity_len, 4, 9, 6};
    entity_read_send(req, &k, 5, argv, lens, roles, on_entity_read, on_entity_read_roles);
}

void entity_get(request *req)
{
    char *id = arena_alloc(&req->pool, IDS_SIZE);
    if (!id) {
        request_fail_internal(req, "out of memory");
        return;
    }
    if (!entity_path_id(req, id))
        return;
    req->state = id;
    /* The role is asked for only when it decides (entity.h). */
    send_entity_read(req, false);
}

/* ---- GET /api/entities/by-alias/{alias} (CONTRACT §9) ---- */

/* An alias claim may be stale (keys.h): the entity's own communityURLAlias decides. */
typedef struct alias_read {
    char id[IDS_SIZE]; /* first: send_entity_read reads the id at req->state */
    char alias[65];
    size_t alias_len;
} alias_read;

static void send_alias_entity_read(request *req, bool roles);

static bool alias_held(const alias_read *ar, const redisReply *f)
{
    const redisReply *a = f->elements >= 4 ? f->element[3] : NULL;
    return a && a->type == REDIS_REPLY_STRING && a->len == ar->alias_len &&
           !memcmp(a->str, ar->alias, a->len);
}

static void on_alias_entity(void *data, int status, redisReply *r)
{
    request *req = data;
    alias_read *ar = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ARRAY && r->elements >= 4 &&
        r->element[0]->type == REDIS_REPLY_STRING && !alias_held(ar, r)) {
        request_fail(req, 404, "not_found", "No entity has this alias.", NULL);
        return;
    }
    entity_read e = entity_read_fields(req, status, r, true);
    if (e == ENTITY_READ_OK)
        send_entity(req, 200, r->element[0]);
    else if (e == ENTITY_READ_ASK_ROLES)
        send_alias_entity_read(req, true);
}

static void on_alias_entity_roles(void *data, int status, redisReply *r)
{
    request *req = data;
    alias_read *ar = req->state;
    const redisReply *f;
    /* EXEC: {the gate's answer {HMGET, the role lookups}} */
    const redisReply *g = status == STORE_OK && r && r->type == REDIS_REPLY_ARRAY &&
                                  r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
                                  r->element[0]->elements >= 1
                              ? r->element[0]
                              : NULL;
    if (g && g->element[0]->type == REDIS_REPLY_ARRAY && g->element[0]->elements >= 4 &&
        g->element[0]->element[0]->type == REDIS_REPLY_STRING && !alias_held(ar, g->element[0])) {
        request_fail(req, 404, "not_found", "No entity has this alias.", NULL);
        return;
    }
    if (entity_read_gated(req, status, r, true, &f) == ENTITY_READ_OK)
        send_entity(req, 200, f->element[0]);
}

static void send_alias_entity_read(request *req, bool roles)
{
    alias_read *ar = req->state;
    entity_keys k;
    keys_entity(&k, ar->id);
    const char *argv[] = {"HMGET", k.entity, "json", "isEnabled", "public", "communityURLAlias"};
    size_t lens[] = {5, k.entity_len, 4, 9, 6, 17};
    entity_read_send(req, &k, 6, argv, lens, roles, on_alias_entity, on_alias_entity_roles);
}

static void on_alias(void *data, int status, redisReply *r)
{
    request *req = data;
    alias_read *ar = req->state;
    if (respond_store_failed(req, status, r))
        return;
    /* "<entity id> <claimed at> <token>", or an older release's shorter forms */
    size_t n = 0;
    if (r->type == REDIS_REPLY_STRING)
        while (n < r->len && r->str[n] != ' ')
            n++;
    if (r->type != REDIS_REPLY_STRING || !ids_valid(r->str, n, 'c')) {
        request_fail(req, 404, "not_found", "No entity has this alias.", NULL);
        return;
    }
    memcpy(ar->id, r->str, n);
    ar->id[n] = '\0';
    send_alias_entity_read(req, false);
}

void entity_by_alias_get(request *req)
{
    alias_read *ar = request_state(req, sizeof *ar);
    if (!ar)
        return;
    slice a = request_path_param(req, 0);
    bool ok = a.len >= 3 && a.len <= 64;
    for (size_t i = 0; ok && i < a.len; i++)
        ok = (a.s[i] >= 'a' && a.s[i] <= 'z') || (a.s[i] >= '0' && a.s[i] <= '9') || a.s[i] == '-';
    if (!ok) {
        request_fail(req, 404, "not_found", "No entity has this alias.", NULL);
        return;
    }
    memcpy(ar->alias, a.s, a.len);
    ar->alias[a.len] = '\0';
    ar->alias_len = a.len;
    char key[KEYS_ALIAS_SIZE];
    size_t klen = keys_alias(key, ar->alias);
    const char *argv[] = {"GET", key};
    size_t lens[] = {3, klen};
    store_read(req->app->store, request_read_flags(req), on_alias, req, 2, argv, lens);
}

/* ---- POST /api/entities: create or update ---- */

typedef struct post_state {
    json_t *body;
    entity_input in;
    char id[IDS_SIZE];
    bool creating;
    bool claimed_new; /* this request took the alias: release it if the write did not happen */
    char token[17];   /* this request's claim of the alias (alias_claim.lua) */
    bool stale_checked;
    char holder[IDS_SIZE];
    char holder_value[IDS_SIZE + 48]; /* the stale claim as stored, for compare-and-set */
    char guard[70]; /* an alias-setting update: "=" + the alias the entity had before */
    int attempts;
    bool indexed;          /* the wallet and directory index entries are added (findindex.h) */
    bool quota_taken;      /* a unit of the creation quota is spent for this create */
    findindex_added added; /* what the index add wrote: a refused write takes it back */
    char (*gaining)[43];   /* an update's owners that are no owners yet: the ones indexed */
    size_t ngaining;
    bool same_name; /* an update that keeps the name: no directory entry to add */
    char *answer;   /* the entity JSON, kept while late index entries are added */
    size_t answer_len;
} post_state;

/* The request's reset hook: releases the JSON the post holds. */
static void post_release(void *data)
{
    post_state *st = data;
    json_decref(st->body);
    json_decref(st->in.fields);
    st->body = st->in.fields = NULL;
}

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

/* Gives up the one claim of `alias` that `id` made with `token`: a newer claim of the same
 * entity (another update, its write perhaps still on the way) has another token and stays. */
static void alias_release(request *req, const char *alias, const char *id, const char *token)
{
    char key[KEYS_ALIAS_SIZE];
    size_t klen = keys_alias(key, alias);
    const char *argv[] = {key, id, token};
    size_t lens[] = {klen, strlen(id), strlen(token)};
    store_script(req->app->store, LUA_ALIAS_RELEASE, on_ignored, NULL, 1, 3, argv, lens);
}

/* A refused write's alias claim, released before the refusal is answered. */
typedef struct release_wait {
    request *req;
    char *err;
    size_t len;
} release_wait;

static void on_alias_released(void *data, int status, redisReply *r)
{
    (void)status, (void)r;
    release_wait *w = data;
    post_state *st = w->req->state;
    redisReply e = {.type = REDIS_REPLY_ERROR, .str = w->err, .len = w->len};
    if (st->indexed)
        findindex_refuse(w->req, &st->added, &e);
    else
        respond_store_failed(w->req, STORE_OK, &e);
}

static void alias_release_then(request *req, const char *alias, const char *id, const char *token,
                               const redisReply *err)
{
    release_wait *w = arena_alloc(&req->pool, sizeof *w);
    char *copy = w ? arena_alloc(&req->pool, err->len + 1) : NULL;
    if (!copy) {
        alias_release(req, alias, id, token);
        respond_store_failed(req, STORE_OK, (redisReply *)err);
        return;
    }
    memcpy(copy, err->str, err->len);
    copy[err->len] = '\0';
    *w = (release_wait){req, copy, err->len};
    char key[KEYS_ALIAS_SIZE];
    size_t klen = keys_alias(key, alias);
    const char *argv[] = {key, id, token};
    size_t lens[] = {klen, strlen(id), strlen(token)};
    store_script(req->app->store, LUA_ALIAS_RELEASE, on_alias_released, w, 1, 3, argv, lens);
}

static void start_alias_update(request *req);

#define ALIAS_ATTEMPTS 10

static void drop_after_update(request *req, const redisReply *old_name,
                              const redisReply *old_owners);
static bool index_after_update(request *req, const redisReply *json, const redisReply *old_name,
                               const redisReply *old_owners);

static void on_write(void *data, int status, redisReply *r)
{
    request *req = data;
    post_state *st = req->state;
    if (status == STORE_OK && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "RETRY", 5)) {
        /* Another update of this entity came between our claim and our write: start over. */
        if (st->claimed_new)
            alias_release(req, st->in.alias, st->id, st->token);
        st->claimed_new = st->stale_checked = false;
        if (++st->attempts < ALIAS_ATTEMPTS) {
            start_alias_update(req);
            return;
        }
        request_fail(req, 409, "conflict",
                     "The entity kept changing while its alias was claimed; try again.", NULL);
        return;
    }
    /* Only Redis's own error answer says the write did not happen. A timeout or a lost
     * connection leaves it unknown: the script may run later, after any claim or release sent
     * since. So the claim stays; if the write never happens, the holder's record does not name
     * the alias and the next claimant takes it over once the grace period has passed. */
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR && st->claimed_new) {
        /* Released before the answer, as the index entries (CONTRACT §12: no trace). */
        alias_release_then(req, st->in.alias, st->id, st->token, r);
        return;
    }
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR && st->indexed) {
        findindex_refuse(req, &st->added, r);
        return;
    }
    if (respond_store_failed(req, status, r)) {
        return;
    }
    /* create: the entity JSON; update: {entity JSON, the alias held before, its claim token} */
    const redisReply *json = r;
    if (!st->creating) {
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
            r->element[1]->type != REDIS_REPLY_STRING ||
            r->element[2]->type != REDIS_REPLY_STRING) {
            request_fail_internal(req, "entity write: unexpected reply");
            return;
        }
        json = r->element[0];
        const char *old = r->element[1]->str, *old_token = r->element[2]->str;
        /* Without a token (a record from before tokens) the old claim is left to the
         * stale-claim takeover rather than released blind. */
        if (*old && *old_token && st->in.has_alias && strcmp(old, st->in.alias) != 0)
            alias_release(req, old, st->id, old_token);
        if (r->elements >= 5) {
            drop_after_update(req, r->element[3], r->element[4]);
            if (json->type == REDIS_REPLY_STRING &&
                index_after_update(req, json, r->element[3], r->element[4]))
                return;
        }
    }
    if (json->type != REDIS_REPLY_STRING) {
        request_fail_internal(req, "entity write: unexpected reply");
        return;
    }
    send_entity(req, st->creating ? 201 : 200, json);
}

static void on_indexed_after(request *req, int status)
{
    (void)status; /* the write happened: an index add-after that failed does not undo it */
    post_state *st = req->state;
    redisReply json = {.type = REDIS_REPLY_STRING, .str = st->answer, .len = st->answer_len};
    send_entity(req, 200, &json);
}

/* The owners the update gave the role that the check found owners already: one taken away
 * between the check and the script (its entry perhaps dropped since) is an owner again; the
 * same for a name the check found and a rename took away meanwhile. Their entries are added
 * now, before the answer (an add-after, in this race only). Returns true when the answer
 * waits for them. */
static bool index_after_update(request *req, const redisReply *json, const redisReply *old_name,
                               const redisReply *old_owners)
{
    post_state *st = req->state;
    if (old_owners->type != REDIS_REPLY_ARRAY)
        return false;
    json_t *name = json_object_get(st->in.fields, "name");
    bool renamed = false;
    if (st->same_name && json_is_string(name) && old_name->type == REDIS_REPLY_STRING) {
        char a[INDEXES_NAME_MAX], b[INDEXES_NAME_MAX];
        size_t al = indexes_fold(old_name->str, old_name->len, a);
        size_t bl = indexes_fold(json_string_value(name), json_string_length(name), b);
        renamed = al != bl || memcmp(a, b, al) != 0;
    }
    char(*late)[43] = NULL;
    size_t n = 0;
    for (size_t i = 0; i < st->in.nowners; i++) {
        bool had = false, indexed = false;
        for (size_t j = 0; j < old_owners->elements && !had; j++) {
            const redisReply *o = old_owners->element[j];
            had = o->type == REDIS_REPLY_STRING && o->len == 42 &&
                  !memcmp(o->str, st->in.owners[i], 42);
        }
        for (size_t j = 0; j < st->ngaining && !indexed; j++)
            indexed = !memcmp(st->gaining[j], st->in.owners[i], 42);
        if (had || indexed)
            continue;
        if (!late && !(late = arena_alloc(&req->pool, st->in.nowners * sizeof *late)))
            return false;
        memcpy(late[n++], st->in.owners[i], 43);
    }
    if ((!n && !renamed) || !(st->answer = arena_alloc(&req->pool, json->len + 1)))
        return false;
    memcpy(st->answer, json->str, json->len);
    st->answer[json->len] = '\0';
    st->answer_len = json->len;
    findindex_add(req, st->id, (const char(*)[43])late, n, INDEXES_OWNER, 0,
                  renamed ? json_string_value(name) : NULL, renamed ? json_string_length(name) : 0,
                  NULL, on_indexed_after);
    return true;
}

/* Remove-after (findindex.h): the owners the update took away and the name it replaced. */
static void drop_after_update(request *req, const redisReply *old_name,
                              const redisReply *old_owners)
{
    post_state *st = req->state;
    if (old_owners->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < old_owners->elements; i++) {
            const redisReply *o = old_owners->element[i];
            bool kept = o->type != REDIS_REPLY_STRING || o->len != 42;
            for (size_t j = 0; !kept && j < st->in.nowners; j++)
                kept = !memcmp(st->in.owners[j], o->str, 42);
            if (!kept) {
                char addr[1][43];
                memcpy(addr[0], o->str, 42);
                addr[0][42] = '\0';
                indexes_drop_roles(req->app, st->id, (const char(*)[43])addr, 1, INDEXES_OWNER,
                                   false);
            }
        }
    }
    json_t *name = json_object_get(st->in.fields, "name");
    if (old_name->type == REDIS_REPLY_STRING && json_is_string(name)) {
        char a[INDEXES_NAME_MAX], b[INDEXES_NAME_MAX];
        size_t al = indexes_fold(old_name->str, old_name->len, a);
        size_t bl = indexes_fold(json_string_value(name), json_string_length(name), b);
        if (al != bl || memcmp(a, b, al) != 0)
            indexes_drop_name(req->app, st->id, old_name->str, old_name->len);
    }
}

static void write_entity_now(request *req);

/* Add-before (findindex.h): a failed add answers the request and writes nothing. */
static void on_indexed(request *req, int status)
{
    post_state *st = req->state;
    if (status != STORE_OK) {
        if (st->claimed_new) /* the write is never sent: its claim goes */
            alias_release(req, st->in.alias, st->id, st->token);
        respond_store_failed(req, status, NULL);
        return;
    }
    st->indexed = true;
    write_entity_now(req);
}

/* Every owner the write names takes the owner role; a creation enters the directory, and a
 * name (required in both) its name entry. */
static void write_entity(request *req)
{
    post_state *st = req->state;
    if (st->indexed) {
        write_entity_now(req);
        return;
    }
    int64_t created = 0;
    json_t *at = json_object_get(st->in.fields, "createdAt");
    if (st->creating && json_is_string(at))
        isotime_parse(json_string_value(at), json_string_length(at), &created);
    json_t *name = json_object_get(st->in.fields, "name");
    if (st->same_name)
        name = NULL;
    /* A creation's owners all gain the role; an update's only those the check found new. */
    const char(*owners)[43] = (const char(*)[43])(st->creating ? st->in.owners : st->gaining);
    size_t nowners = st->creating ? st->in.nowners : st->ngaining;
    findindex_add(req, st->id, owners, nowners, INDEXES_OWNER, created,
                  json_is_string(name) ? json_string_value(name) : NULL,
                  json_is_string(name) ? json_string_length(name) : 0, &st->added, on_indexed);
}

/* Sends the create or update script. The rendered JSON is local: store_script copies its
 * arguments, and an answer given inside the call (store down) ends the request's state. */
static void write_entity_now(request *req)
{
    post_state *st = req->state;
    entity_keys k;
    keys_entity(&k, st->id);
    /* The record names the claim backing its alias, so the update that moves the alias away
     * releases exactly that claim. */
    if (st->in.has_alias)
        json_object_set_new(st->in.fields, "aliasClaim",
                            json_string(st->in.alias[0] ? st->token : ""));
    json_t *owner_list = json_array();
    for (size_t i = 0; i < st->in.nowners; i++)
        json_array_append_new(owner_list, json_string(st->in.owners[i]));
    char *owners = json_dumps(owner_list, JSON_COMPACT);
    char *fields = json_dumps(st->in.fields, JSON_COMPACT);
    json_decref(owner_list);
    if (!owners || !fields) {
        free(owners);
        free(fields);
        request_fail_internal(req, "entity write: encoding");
        return;
    }
    if (st->creating) {
        const char *argv[] = {k.entity, k.owners, fields, owners};
        size_t lens[] = {k.entity_len, k.owners_len, strlen(fields), strlen(owners)};
        store_script(req->app->store, LUA_ENTITY_CREATE, on_write, req, 2, 4, argv, lens);
    } else {
        char v[24] = "";
        if (st->in.has_v)
            snprintf(v, sizeof v, "%lld", (long long)st->in.v);
        const char *platform = is_platform(req) ? "1" : "0";
        entity_event_args ev;
        entity_event_args_fill(req, isotime_now_ms(), &ev);
        char hooks[KEYS_ENTITY_SIZE];
        keys_webhooks(hooks, st->id);
        const char *argv[] = {k.entity, k.owners, k.admins, hooks,     req->caller, platform,
                              v,        fields,   owners,   st->guard, ev.max,      ev.at};
        size_t lens[12];
        for (size_t i = 0; i < 12; i++)
            lens[i] = strlen(argv[i]);
        store_script(req->app->store, LUA_ENTITY_UPDATE, on_write, req, 4, 12, argv, lens);
    }
    free(owners);
    free(fields);
}

static void claim_alias(request *req);

static void alias_taken(request *req)
{
    post_state *st = req->state;
    if (st->quota_taken) /* nothing was created: the creation is not counted */
        limits_give(req, LIMITS_CREATIONS, req->caller);
    request_fail(req, 409, "conflict", "That communityURLAlias belongs to another entity.",
                 "communityURLAlias");
}

/* The holder's own record says whether its claim is live or left over from a failed write. */
static void on_holder(void *data, int status, redisReply *r)
{
    request *req = data;
    post_state *st = req->state;
    if (respond_store_failed(req, status, r)) {
        return;
    }
    if (r->type == REDIS_REPLY_STRING && !strcmp(r->str, st->in.alias)) {
        alias_taken(req);
        return;
    }
    st->stale_checked = true;
    claim_alias(req);
}

/* A young claim's holder being erased (its record there) cannot be writing the alias. */
static void on_holder_erased(void *data, int status, redisReply *r)
{
    request *req = data;
    post_state *st = req->state;
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        alias_taken(req);
        return;
    }
    st->stale_checked = true;
    claim_alias(req);
}

/* A claim younger than this may belong to a write still on its way (on another instance):
 * only an older one can be judged left over by a failed write. Well past any write deadline. */
static long long alias_grace_seconds(const request *req)
{
    long long t = 2 * req->app->cfg.redis_timeout_ms / 1000 + 1;
    return t > 60 ? t : 60;
}

static void on_claim(void *data, int status, redisReply *r)
{
    request *req = data;
    post_state *st = req->state;
    if (respond_store_failed(req, status, r))
        return;
    if (r->type == REDIS_REPLY_STRING && (!strcmp(r->str, "+") || !strcmp(r->str, "="))) {
        st->claimed_new = r->str[0] == '+';
        /* Only a claim found already ours can be undone by a sibling update of this entity that
         * moves or clears the alias before our write: that one keeps the guard. */
        if (st->claimed_new)
            st->guard[0] = '\0';
        write_entity(req);
        return;
    }
    /* {holder id, claim age in seconds, stored value} */
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[2]->type != REDIS_REPLY_STRING ||
        r->element[2]->len >= sizeof st->holder_value) {
        request_fail_internal(req, "alias_claim: unexpected reply");
        return;
    }
    const redisReply *holder = r->element[0];
    if (st->stale_checked || !ids_valid(holder->str, holder->len, 'c')) {
        alias_taken(req);
        return;
    }
    memcpy(st->holder, holder->str, IDS_SIZE);
    memcpy(st->holder_value, r->element[2]->str, r->element[2]->len + 1);
    if (strtoll(r->element[1]->str, NULL, 10) < alias_grace_seconds(req)) {
        /* Young, unless its holder is deleted: a delete whose own release failed leaves a
         * claim no write of that entity can ever use again (CONTRACT §8: the alias is free
         * from the delete's answer on). */
        char rec[KEYS_ENTITY_SIZE];
        size_t rlen = keys_erasure(rec, st->holder);
        const char *argv[] = {"EXISTS", rec};
        size_t lens[] = {6, rlen};
        store_command(req->app->store, on_holder_erased, req, 2, argv, lens);
        return;
    }
    entity_keys hk;
    keys_entity(&hk, st->holder);
    const char *argv[] = {"HGET", hk.entity, "communityURLAlias"};
    size_t lens[] = {4, hk.entity_len, 17};
    store_command(req->app->store, on_holder, req, 3, argv, lens);
}

static void claim_alias(request *req)
{
    post_state *st = req->state;
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        request_fail_internal(req, "no randomness for an alias claim");
        return;
    }
    hex_encode(rnd, sizeof rnd, st->token);
    char key[KEYS_ALIAS_SIZE];
    size_t klen = keys_alias(key, st->in.alias);
    const char *stale = st->stale_checked ? st->holder_value : "";
    const char *argv[] = {key, st->id, stale, st->token};
    size_t lens[] = {klen, strlen(st->id), strlen(stale), strlen(st->token)};
    store_script(req->app->store, LUA_ALIAS_CLAIM, on_claim, req, 1, 4, argv, lens);
}

static void on_creation_quota(request *req, void *data, int status, long long wait_ms);
static void post_write(request *req);

void entity_post(request *req)
{
    post_state *st = request_state(req, sizeof *st);
    if (!st)
        return;
    json_t *body = validate_body(req);
    if (!body)
        return; /* answered: st is gone with the request */
    st->body = body;
    req->on_reset = post_release;
    req->on_reset_data = st;
    verr e;
    if (entity_parse_input(req, st->body, &st->in, &e) != 0) {
        validate_fail(req, &e);
        return;
    }
    bool platform = is_platform(req);
    if (st->in.has_enabled && !platform) {
        request_fail(req, 403, "forbidden", "Only platform admins may change isEnabled.", NULL);
        return;
    }
    char now[ISOTIME_STRING_SIZE];
    isotime_format(isotime_now_ms(), now);
    st->creating = !st->in.has_id;
    if (st->creating) {
        if (!strcmp(req->app->cfg.entity_creation, "platform") && !platform) {
            request_fail(req, 403, "forbidden", "Only platform admins may create entities.", NULL);
            return;
        }
        if (ids_new(st->id, 'c') != 0) {
            request_fail_internal(req, "no randomness for an id");
            return;
        }
        /* The creator owns what it creates. */
        bool listed = false;
        for (size_t i = 0; i < st->in.nowners && !listed; i++)
            listed = !strcmp(st->in.owners[i], req->caller);
        if (!listed) {
            char(*more)[43] = arena_alloc(&req->pool, (st->in.nowners + 1) * sizeof *more);
            if (!more) {
                request_fail_internal(req, "out of memory");
                return;
            }
            memcpy(more, st->in.owners, st->in.nowners * sizeof *more);
            memcpy(more[st->in.nowners++], req->caller, 43);
            st->in.owners = more;
        }
        entity_fill_defaults(&st->in);
        json_object_set_new(st->in.fields, "id", json_string(st->id));
        json_object_set_new(st->in.fields, "createdAt", json_string(now));
        json_object_set_new(st->in.fields, "createdBy", json_string(req->caller));
    } else {
        memcpy(st->id, st->in.id, IDS_SIZE);
    }
    json_object_set_new(st->in.fields, "modifiedAt", json_string(now));
    if (st->creating && limits_apply(req, LIMITS_CREATIONS, is_platform(req))) {
        /* Its own round trip: creations are rare, and the quota key is in another slot than
         * the entity's (never one script with it). */
        limits_take(req, LIMITS_CREATIONS, req->caller, on_creation_quota, st);
        return;
    }
    post_write(req);
}

static void post_write_checked(request *req);

/* An update's check (CONTRACT §12): only a caller the update script would let through gets
 * an alias claim or index entries written for it. */
static void on_update_check(request *req, const redisReply *r)
{
    post_state *st = req->state;
    st->ngaining = entity_check_split(req, r, (const char(*)[43])st->in.owners, st->in.nowners,
                                      false, &st->gaining);
    if (st->in.nowners && !st->gaining) {
        request_fail_internal(req, "out of memory");
        return;
    }
    json_t *name = json_object_get(st->in.fields, "name");
    const redisReply *old = r->element[0];
    if (json_is_string(name) && old->type == REDIS_REPLY_STRING) {
        char a[INDEXES_NAME_MAX], b[INDEXES_NAME_MAX];
        size_t al = indexes_fold(old->str, old->len, a);
        size_t bl = indexes_fold(json_string_value(name), json_string_length(name), b);
        st->same_name = al == bl && !memcmp(a, b, al);
    }
    post_write_checked(req);
}

static void post_write(request *req)
{
    post_state *st = req->state;
    if (!st->creating) {
        entity_check(req, st->id, "owners", INDEXES_OWNER, (const char(*)[43])st->in.owners,
                     st->in.nowners, on_update_check);
        return;
    }
    post_write_checked(req);
}

static void post_write_checked(request *req)
{
    post_state *st = req->state;
    if (!st->creating && st->in.has_alias)
        start_alias_update(req); /* guarded against a concurrent alias change */
    else if (st->in.has_alias && st->in.alias[0])
        claim_alias(req);
    else
        write_entity(req);
}

static void on_creation_quota(request *req, void *data, int status, long long wait_ms)
{
    post_state *st = data;
    if (status != STORE_OK || wait_ms > 0) {
        limits_refuse(req, LIMITS_CREATIONS, status, wait_ms);
        return;
    }
    st->quota_taken = true;
    post_write(req);
}

static void on_guard(void *data, int status, redisReply *r)
{
    request *req = data;
    post_state *st = req->state;
    if (respond_store_failed(req, status, r))
        return;
    /* An unknown entity has no alias: the update script then answers 404. */
    snprintf(st->guard, sizeof st->guard, "=%.64s", r->type == REDIS_REPLY_STRING ? r->str : "");
    if (st->in.alias[0]) {
        claim_alias(req);
    } else {
        st->guard[0] = '\0'; /* clearing claims nothing another update could undo */
        write_entity(req);
    }
}

/* An update that sets or clears the alias reads the current one first; its write requires it
 * unchanged (updates that leave the alias alone never make it retry). */
static void start_alias_update(request *req)
{
    post_state *st = req->state;
    entity_keys k;
    keys_entity(&k, st->id);
    const char *argv[] = {"HGET", k.entity, "communityURLAlias"};
    size_t lens[] = {4, k.entity_len, 17};
    store_command(req->app->store, on_guard, req, 3, argv, lens);
}
