/* link: what every Redis connection of the store shares: framing, scripts, keys, deadlines,
 * backoff (link.h). */
#include "redis/link.h"

#include <string.h>

#include "core/app.h"
#include "redis/lua_scripts.h"

void link_frame(buf *b, int argc, const char **argv, const size_t *lens)
{
    buf_append(b, "*", 1);
    buf_append_uint(b, (unsigned long long)argc);
    buf_append(b, "\r\n", 2);
    for (int i = 0; i < argc; i++) {
        buf_append(b, "$", 1);
        buf_append_uint(b, lens[i]);
        buf_append(b, "\r\n", 2);
        buf_append(b, argv[i], lens[i]);
        buf_append(b, "\r\n", 2);
    }
}

/* One buffer for every command: hiredis copies the bytes before redisAsyncFormattedCommand
 * returns. Loop thread only. */
static buf resp = BUF_INIT;

int link_send(redisAsyncContext *ac, redisCallbackFn *fn, void *priv, int argc, const char **argv,
              const size_t *lens)
{
    buf_reset(&resp, 1 << 20);
    link_frame(&resp, argc, argv, lens);
    return redisAsyncFormattedCommand(ac, fn, priv, resp.data, resp.len);
}

int link_send_script_load(redisAsyncContext *ac, redisCallbackFn *fn, void *priv, int script)
{
    const char *argv[] = {"SCRIPT", "LOAD", lua_scripts[script].source};
    size_t lens[] = {6, 4, strlen(lua_scripts[script].source)};
    return link_send(ac, fn, priv, 3, argv, lens);
}

void link_reload_scripts(redisAsyncContext *ac)
{
    for (int s = 0; s < LUA_SCRIPT_COUNT; s++)
        link_send_script_load(ac, NULL, NULL, s);
}

bool link_exec_lost_script(const redisReply *reply)
{
    if (reply->type != REDIS_REPLY_ARRAY)
        return false;
    for (size_t i = 0; i < reply->elements; i++)
        if (reply->element[i]->type == REDIS_REPLY_ERROR &&
            !strncmp(reply->element[i]->str, "NOSCRIPT", 8))
            return true;
    return false;
}

int link_auth_argv(const char *user, const char *password, const char *argv[3], size_t lens[3])
{
    if (!password || !password[0])
        return 0;
    int argc = 0;
    argv[argc] = "AUTH";
    lens[argc++] = 4;
    if (user && user[0]) {
        argv[argc] = user;
        lens[argc++] = strlen(user);
    }
    argv[argc] = password;
    lens[argc++] = strlen(password);
    return argc;
}

int link_cmd_keys(const store_cmd *c, int *first)
{
    if (c->argc >= 3 && c->lens[0] == 7 && !memcmp(c->argv[0], "EVALSHA", 7)) {
        int nkeys = 0;
        for (size_t i = 0; i < c->lens[2] && i < 3; i++)
            nkeys = nkeys * 10 + (c->argv[2][i] - '0');
        *first = 3;
        return nkeys < c->argc - 3 ? nkeys : c->argc - 3;
    }
    *first = 1;
    return c->argc >= 2 ? 1 : 0;
}

void link_list_push(link_list *l, link_entry *e)
{
    e->prev = l->tail;
    e->next = NULL;
    if (l->tail)
        l->tail->next = e;
    else
        l->head = e;
    l->tail = e;
}

void link_list_unlink(link_list *l, link_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        l->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        l->tail = e->prev;
    e->prev = e->next = NULL;
}

void link_retry_init(link_retry *r, uv_loop_t *loop, void *data)
{
    backoff_init(&r->backoff, LINK_BACKOFF_MIN_MS, LINK_BACKOFF_MAX_MS);
    uv_timer_init(loop, &r->timer);
    r->timer.data = data;
}

void link_retry_schedule(link_retry *r, uv_timer_cb fn)
{
    uv_timer_start(&r->timer, fn, backoff_next(&r->backoff), 0);
}

void link_retry_reset(link_retry *r)
{
    backoff_reset(&r->backoff);
}

bool link_stalled(const struct app *a, size_t outstanding, uint64_t last_progress_ms, uint64_t now)
{
    uint64_t stall = (uint64_t)a->cfg.redis_timeout_ms * 2;
    if (stall < 5000)
        stall = 5000;
    return outstanding && now - last_progress_ms > stall;
}
