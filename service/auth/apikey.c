/* apikey: see apikey.h. */
#include "auth/apikey.h"

#include <stdio.h>
#include <string.h>

#include "auth/auth_int.h"
#include "core/app.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"

bool apikey_send(request *req, const api_key *k, store_cb cb, void *data)
{
    entity_keys ek;
    keys_entity(&ek, k->entity);
    char hash[KEYS_ENTITY_SIZE];
    size_t hlen = keys_apikeys(hash, k->entity);
    const char *argv[] = {"EVALSHA", store_script_sha(req->app->store, LUA_APIKEY_CHECK),
                          "2",       hash,
                          ek.owners, k->id};
    size_t lens[] = {7, 40, 1, hlen, ek.owners_len, TOKEN_ID_LEN};
    /* Through the read cache: the script declares both keys it reads, which Redis then tracks,
     * so a repeated request costs Redis nothing (as a repeated signed one does) and a deleted
     * key or a removed owner leaves every instance's cache when Redis announces it. */
    return store_read(req->app->store, STORE_READ_FRESH, cb, data, 6, argv, lens);
}

/* "<scope>:<creator>:<createdAtMs>:<key hash>:<name>" into out; false when of no known form. */
static bool parse_record(const char *s, size_t len, const api_key *k, apikey_record *out)
{
    const char *end = s + len, *p = memchr(s, ':', len);
    if (!p)
        return false;
    size_t slen = (size_t)(p - s);
    if (slen == 5 && !memcmp(s, "award", 5))
        out->scope = APIKEY_SCOPE_AWARD;
    else if (slen == 5 && !memcmp(s, "admin", 5))
        out->scope = APIKEY_SCOPE_ADMIN;
    else
        return false;
    const char *c = p + 1;
    if (end - c < 43 || c[42] != ':')
        return false;
    memcpy(out->creator, c, 42);
    out->creator[42] = '\0';
    const char *t = memchr(c + 43, ':', (size_t)(end - c - 43));
    if (!t || end - (t + 1) < TOKEN_HASH_HEX_LEN ||
        (end - (t + 1) > TOKEN_HASH_HEX_LEN && t[1 + TOKEN_HASH_HEX_LEN] != ':'))
        return false;
    return token_hash_equal(t + 1, k->hash);
}

int apikey_answer(request *req, const api_key *k, int status, const redisReply *reply,
                  apikey_record *out)
{
    if (status == STORE_TIMEOUT)
        return APIKEY_TIMEOUT;
    if (status != STORE_OK)
        return APIKEY_UNAVAILABLE;
    /* The script's false (a nil: the store speaks RESP2). */
    if (reply->type == REDIS_REPLY_NIL)
        return APIKEY_DEAD;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_INTEGER)
        return APIKEY_UNAVAILABLE;
    const redisReply *rec = reply->element[0], *used = reply->element[2];
    if (!parse_record(rec->str, rec->len, k, out) || reply->element[1]->integer != 1)
        return APIKEY_DEAD; /* another key's record, one of no known form, or no owner now */
    char key[KEYS_ENTITY_SIZE];
    auth_touch(req, key, keys_apikeys(key, k->entity), k->id, TOKEN_ID_LEN, used);
    return APIKEY_VALID;
}
