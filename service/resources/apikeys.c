/* apikeys: entity API keys (CONTRACT section 13), made, listed and ended by the entity's
 * owners. A key is answered once, at its creation, and never logged; Redis keeps its hash
 * alone (keys.h, apikeys). Using a key as a credential is auth's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/respond.h"
#include "api/validate.h"
#include "auth/auth.h"
#include "auth/token.h"
#include "core/app.h"
#include "core/isotime.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "resources/entity.h"
#include "resources/handlers.h"

/* CONTRACT section 13: past it a create is 409. */
#define APIKEYS_MAX "20"

/* The entity's keys and what a write script of it takes before its own arguments: keys
 * entity, owners, admins, apikeys; arguments caller, platform, events_max, now (ISO). */
typedef struct apikeys_write {
    entity_write w;
    char apikeys[KEYS_ENTITY_SIZE];
} apikeys_write;

static void write_fill(request *req, const char *id, int64_t now_ms, apikeys_write *a)
{
    entity_write_fill(req, id, now_ms, &a->w);
    keys_apikeys(a->apikeys, id);
}

/* ---- POST /api/entities/{id}/api-keys ---- */

typedef struct create_state {
    char key[TOKEN_KEY_LEN + 1];
    api_key k;
    const char *name, *scope;
    char created_at[ISOTIME_STRING_SIZE];
} create_state;

static void on_created(void *data, int status, redisReply *r)
{
    request *req = data;
    create_state *st = req->state;
    if (respond_store_reply(req, status, r, REDIS_REPLY_INTEGER,
                            "apikey_create: unexpected reply")) {
        json_t *d = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", st->k.id, "name", st->name,
                              "scope", st->scope, "key", st->key, "createdAt", st->created_at,
                              "createdBy", req->caller);
        request_reply(req, 201, json_pack("{s:b, s:o}", "success", 1, "data", d));
    }
    /* the answer holds its own copy: none is left in the request's memory */
    memset(st->key, 0, sizeof st->key);
}

void apikeys_post(request *req)
{
    char id[IDS_SIZE];
    json_t *body;
    create_state *st = entity_write_open(req, id, sizeof *st, &body);
    if (!st)
        return;
    verr e;
    const char *name, *scope = NULL;
    size_t nlen, slen = 0;
    json_t *sv = json_object_get(body, "scope");
    if (validate_text(body, "name", true, TEXT_NAME, &name, &nlen, &e) != 1) {
        json_decref(body);
        validate_fail(req, &e);
        return;
    }
    if (json_is_string(sv)) {
        scope = json_string_value(sv);
        slen = json_string_length(sv);
    }
    if (!json_is_string(sv) ||
        !((slen == 5 && !memcmp(scope, "award", 5)) || (slen == 5 && !memcmp(scope, "admin", 5)))) {
        json_decref(body);
        request_fail_field(req, "scope", "scope must be \"award\" or \"admin\".");
        return;
    }
    st->name = arena_strndup(&req->pool, name, nlen);
    st->scope = scope[1] == 'w' ? "award" : "admin";
    json_decref(body);
    if (!st->name) {
        request_fail_internal(req, "apikeys: out of memory");
        return;
    }
    if (token_new_key(id, st->key, &st->k) != 0) {
        request_fail_internal(req, "apikeys: no key could be made");
        return;
    }
    int64_t now = isotime_now_ms();
    isotime_format(now, st->created_at);
    apikeys_write a;
    write_fill(req, id, now, &a);
    char now_ms[24];
    snprintf(now_ms, sizeof now_ms, "%lld", (long long)now);
    const char *head[] = {
        a.w.k.entity, a.w.k.owners, a.w.k.admins,
        a.apikeys,    req->caller,  auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
        a.w.ev.max,   a.w.ev.at,    now_ms,
        st->k.id,     st->scope,    st->k.hash,
        st->name,     APIKEYS_MAX};
    entity_script(req, LUA_APIKEY_CREATE, on_created, 4, head, sizeof head / sizeof head[0], NULL,
                  0);
}

/* ---- GET /api/entities/{id}/api-keys ---- */

/* One key's record, "<scope>:<creator>:<createdAtMs>:<key hash>:<name>", in the reply. */
typedef struct listed {
    const redisReply *id, *rec;
    long long created_ms;
} listed;

static int listed_cmp(const void *pa, const void *pb)
{
    const listed *a = pa, *b = pb;
    if (a->created_ms != b->created_ms)
        return a->created_ms < b->created_ms ? -1 : 1;
    return strcmp(a->id->str, b->id->str);
}

/* The n-th ':' of s (len bytes) from the start, or NULL. */
static const char *nth_colon(const char *s, size_t len, int n)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':' && --n == 0)
            return s + i;
    return NULL;
}

/* The key's item, or NULL for a record not of the form above (skipped, never answered). */
static json_t *listed_item(const listed *l, const redisReply *all)
{
    const char *s = l->rec->str, *end = s + l->rec->len;
    const char *c1 = nth_colon(s, l->rec->len, 1), *c2 = nth_colon(s, l->rec->len, 2),
               *c4 = nth_colon(s, l->rec->len, 4);
    if (!c1 || !c2 || !c4)
        return NULL;
    char created[ISOTIME_STRING_SIZE], used[ISOTIME_STRING_SIZE];
    isotime_format(l->created_ms, created);
    json_t *last = json_null();
    char field[4 + TOKEN_ID_LEN];
    snprintf(field, sizeof field, "u:%s", l->id->str);
    for (size_t i = 0; i + 1 < all->elements; i += 2)
        if (all->element[i]->type == REDIS_REPLY_STRING && !strcmp(all->element[i]->str, field) &&
            all->element[i + 1]->type == REDIS_REPLY_STRING) {
            isotime_format(strtoll(all->element[i + 1]->str, NULL, 10), used);
            last = json_string(used);
        }
    return json_pack("{s:s, s:s#, s:s#, s:s, s:s#, s:o}", "id", l->id->str, "name", c4 + 1,
                     (int)(end - c4 - 1), "scope", s, (int)(c1 - s), "createdAt", created,
                     "createdBy", c1 + 1, (int)(c2 - c1 - 1), "lastUsedAt", last);
}

static void on_listed(void *data, int status, redisReply *r)
{
    request *req = data;
    if (!respond_store_reply(req, status, r, REDIS_REPLY_ARRAY, "apikeys_list: unexpected reply"))
        return;
    listed *keys = arena_alloc(&req->pool, (r->elements / 2 + 1) * sizeof *keys);
    if (!keys) {
        request_fail_internal(req, "apikeys: out of memory");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *f = r->element[i], *v = r->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            !strncmp(f->str, "u:", 2))
            continue;
        const char *c2 = nth_colon(v->str, v->len, 2);
        keys[n++] = (listed){f, v, c2 ? strtoll(c2 + 1, NULL, 10) : 0};
    }
    qsort(keys, n, sizeof *keys, listed_cmp);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *item = listed_item(&keys[i], r);
        if (item)
            json_array_append_new(list, item);
    }
    request_reply(req, 200, json_pack("{s:b, s:o}", "success", 1, "data", list));
}

void apikeys_get(request *req)
{
    char id[IDS_SIZE];
    if (!entity_path_id(req, id))
        return;
    entity_keys k;
    keys_entity(&k, id);
    char apikeys[KEYS_ENTITY_SIZE];
    keys_apikeys(apikeys, id);
    const char *head[] = {
        k.entity, k.owners,    k.admins,
        apikeys,  req->caller, auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0"};
    entity_script(req, LUA_APIKEYS_LIST, on_listed, 4, head, sizeof head / sizeof head[0], NULL, 0);
}

/* ---- DELETE /api/entities/{id}/api-keys/{keyId} ---- */

static void on_deleted(void *data, int status, redisReply *r)
{
    request *req = data;
    /* The hash is a declared key of the script: this instance's read cache lets it go on the
     * reply, the others' when Redis announces the change. */
    if (respond_store_reply(req, status, r, REDIS_REPLY_INTEGER, "apikey_delete: unexpected reply"))
        respond_deleted(req);
}

void apikeys_delete(request *req)
{
    char id[IDS_SIZE], kid[TOKEN_ID_LEN + 1];
    if (!entity_path_id(req, id))
        return;
    slice k = request_path_param(req, 1);
    bool ok = k.len == TOKEN_ID_LEN;
    for (size_t i = 0; ok && i < k.len; i++)
        ok = (k.s[i] >= '0' && k.s[i] <= '9') || (k.s[i] >= 'a' && k.s[i] <= 'f');
    if (!ok) {
        request_fail(req, 404, "not_found", "No such API key.", NULL);
        return;
    }
    memcpy(kid, k.s, k.len);
    kid[k.len] = '\0';
    apikeys_write a;
    write_fill(req, id, isotime_now_ms(), &a);
    const char *head[] = {
        a.w.k.entity, a.w.k.owners, a.w.k.admins,
        a.apikeys,    req->caller,  auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0",
        a.w.ev.max,   a.w.ev.at,    kid};
    entity_script(req, LUA_APIKEY_DELETE, on_deleted, 4, head, sizeof head / sizeof head[0], NULL,
                  0);
}
