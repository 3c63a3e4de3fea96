/* auth touch: the lastUsedAt of a credential kept in a hash beside its record (a session's, an
 * API key's: field u:<id>), written at most once a minute per credential and instance, by
 * redis/lua/credential_touch.lua, without waiting for it. */
#include <stdio.h>

#include "auth/auth_int.h"
#include "core/isotime.h"
#include "redis/lua_scripts.h"

#define MINUTE_MS 60000

long long auth_leading_number(const char *s, size_t len, size_t *used)
{
    long long v = 0;
    size_t i = 0;
    for (; i < len && s[i] != ':'; i++) {
        if (s[i] < '0' || s[i] > '9' || i >= 18)
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (used)
        *used = i;
    return i ? v : -1;
}

static void on_touched(void *data, int status, redisReply *reply)
{
    /* Fire and forget: a touch that failed is tried again on the credential's next use. */
    (void)data;
    (void)status;
    (void)reply;
}

void auth_touch(request *req, const char *hash, size_t hash_len, const char *id, size_t id_len,
                const redisReply *used)
{
    long long now = isotime_now_ms(), minute = now - now % MINUTE_MS, last = -1;
    if (used->type == REDIS_REPLY_STRING)
        last = auth_leading_number(used->str, used->len, NULL);
    if (last >= minute)
        return;
    char m[24];
    int mlen = snprintf(m, sizeof m, "%lld", minute);
    const char *argv[] = {hash, id, m};
    size_t lens[] = {hash_len, id_len, (size_t)mlen};
    store_script(req->app->store, LUA_CREDENTIAL_TOUCH, on_touched, NULL, 1, 3, argv, lens);
}
