/* entity_delete: DELETE /api/entities/{id}: the entity is gone at once, erased in the background.
 *
 * Three steps, in this order (keys.h, erasures): the entity joins the erasures set (its own
 * slot), then entity_delete.lua renames its hash to its erasure record (the entity's slot),
 * then the alias claim is released (the alias's slot). The set's entry comes first so that no
 * crash can leave a deleted entity that no instance will erase: an entry whose delete never
 * happened is dropped by the erasure after a grace period (jobs/erasure.c). Before all three,
 * a read-only check of the caller's right (write_check.lua): a refused delete lists nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "resources/entity.h"
#include "resources/handlers.h"
#include "api/respond.h"
#include "auth/auth.h"
#include "core/app.h"
#include "core/isotime.h"
#include "crypto/hex.h"
#include "jobs/erasure.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

typedef struct delete_state {
    char id[IDS_SIZE];
    char v[24]; /* the expected __v, or "" */
    int64_t at_ms;
    char entry[IDS_SIZE + 48]; /* this request's entry in the erasures set (keys.h) */
    char *refusal;             /* the script's refusal, answered once the entry is gone */
    size_t refusal_len;
} delete_state;

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

static void answer_deleted(request *req)
{
    respond_deleted(req);
    erasure_kick(req->app->erasure);
}

/* Whatever the release's outcome the entity is deleted: an alias claim left behind is
 * released by the erasure's end, or taken over as stale (keys.h, alias). */
static void on_released(void *data, int status, redisReply *r)
{
    (void)status, (void)r;
    answer_deleted(data);
}

static void on_unlisted(void *data, int status, redisReply *r)
{
    (void)status, (void)r;
    request *req = data;
    delete_state *st = req->state;
    redisReply e = {.type = REDIS_REPLY_ERROR, .str = st->refusal, .len = st->refusal_len};
    respond_store_failed(req, STORE_OK, &e);
}

/* {the alias held, its claim token} */
static void on_delete(void *data, int status, redisReply *r)
{
    request *req = data;
    delete_state *st = req->state;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR) {
        /* Refused for sure (404, 403, 409): this request's own entry goes, before the answer
         * (CONTRACT §12). Only its own: the entry of a concurrent delete that succeeded has
         * another name. An unknown outcome keeps it (the script may still run); it ages out if
         * no record ever appears. */
        st->refusal = arena_alloc(&req->pool, r->len + 1);
        const char *argv[] = {"ZREM", KEYS_ERASURES, st->entry};
        size_t lens[] = {4, strlen(KEYS_ERASURES), strlen(st->entry)};
        if (st->refusal) {
            memcpy(st->refusal, r->str, r->len);
            st->refusal[r->len] = '\0';
            st->refusal_len = r->len;
            store_command(req->app->store, on_unlisted, req, 3, argv, lens);
            return;
        }
        store_command(req->app->store, on_ignored, NULL, 3, argv, lens);
    }
    if (respond_store_failed(req, status, r))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        request_fail_internal(req, "entity_delete: unexpected reply");
        return;
    }
    const redisReply *alias = r->element[0], *token = r->element[1];
    /* Released before the answer, so that the alias is free from the answer on. */
    if (alias->len > 0 && token->len > 0 && alias->len < 70) {
        char key[KEYS_ALIAS_SIZE];
        size_t klen = keys_alias(key, alias->str);
        const char *argv[] = {key, st->id, token->str};
        size_t lens[] = {klen, strlen(st->id), token->len};
        if (klen) {
            store_script(req->app->store, LUA_ALIAS_RELEASE, on_released, req, 1, 3, argv, lens);
            return;
        }
    }
    answer_deleted(req);
}

static void on_listed(void *data, int status, redisReply *r)
{
    request *req = data;
    delete_state *st = req->state;
    if (respond_store_failed(req, status, r))
        return;
    entity_keys k;
    keys_entity(&k, st->id);
    char rec[KEYS_ENTITY_SIZE], at_ms[24], at[ISOTIME_STRING_SIZE];
    size_t rlen = keys_erasure(rec, st->id);
    snprintf(at_ms, sizeof at_ms, "%lld", (long long)st->at_ms);
    isotime_format(st->at_ms, at);
    const char *platform = auth_is_platform_admin(req->app->auth, req->caller) ? "1" : "0";
    const char *argv[] = {k.entity, k.owners, k.admins, rec, req->caller,
                          platform, st->v,    at_ms,    at,  KEYS_ERASE_IDS};
    size_t lens[] = {k.entity_len,        k.owners_len,
                     k.admins_len,        rlen,
                     strlen(req->caller), 1,
                     strlen(st->v),       strlen(at_ms),
                     strlen(at),          strlen(KEYS_ERASE_IDS)};
    store_script(req->app->store, LUA_ENTITY_DELETE, on_delete, req, 4, 10, argv, lens);
}

static void on_delete_check(request *req, const redisReply *r);

void entity_delete(request *req)
{
    delete_state *st = request_state(req, sizeof *st);
    if (!st || !entity_path_id(req, st->id))
        return;
    size_t len;
    const char *v = request_param(req, "v", &len);
    if (v) {
        bool ok = len > 0 && len <= 18;
        for (size_t i = 0; ok && i < len; i++)
            ok = v[i] >= '0' && v[i] <= '9';
        if (!ok) {
            request_fail_field(req, "v", "v must be the entity's __v, a non-negative integer.");
            return;
        }
        /* The stored __v is the integer's decimal text: compare in that form. */
        snprintf(st->v, sizeof st->v, "%lld", strtoll(v, NULL, 10));
    }
    st->at_ms = isotime_now_ms();
    uint8_t rnd[8];
    char token[17];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        request_fail_internal(req, "no randomness for an erasure entry");
        return;
    }
    hex_encode(rnd, sizeof rnd, token);
    snprintf(st->entry, sizeof st->entry, "%s:%lld:%s", st->id, (long long)st->at_ms, token);
    /* Asked first (CONTRACT §12): a caller the script would refuse lists no erasure. */
    entity_check(req, st->id, "owners", "", NULL, 0, on_delete_check);
}

static void on_delete_check(request *req, const redisReply *r)
{
    (void)r;
    delete_state *st = req->state;
    /* Listed first, and only then deleted (see the top of this file). */
    const char *argv[] = {"ZADD", KEYS_ERASURES, "0", st->entry};
    size_t lens[] = {4, strlen(KEYS_ERASURES), 1, strlen(st->entry)};
    store_command(req->app->store, on_listed, req, 4, argv, lens);
}
