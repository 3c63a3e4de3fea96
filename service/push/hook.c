/* hook: see hook.h. */
#include "push/hook.h"

#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "core/log.h"
#include "redis/store.h"

bool webhook_id_valid(const char *s, size_t len)
{
    if (len != WEBHOOK_ID_SIZE - 1 || memcmp(s, "wh-", 3) != 0)
        return false;
    char c[IDS_SIZE];
    c[0] = 'c';
    memcpy(c + 1, s + 2, len - 2);
    return ids_valid(c, IDS_SIZE - 1, 'c');
}

bool hook_reply_is(const redisReply *r, const char *s)
{
    return r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING) &&
           !strcmp(r->str, s);
}

bool hook_take_ok(const redisReply *r)
{
    return r->elements >= 4 && r->element[1]->type == REDIS_REPLY_STRING &&
           r->element[2]->type == REDIS_REPLY_STRING && r->element[3]->type == REDIS_REPLY_STRING;
}

void hook_log_error(const char *what, int status, const redisReply *r)
{
    if (status == STORE_OK && r && r->type == REDIS_REPLY_ERROR &&
        strncmp(r->str, "TRYAGAIN", 8) != 0)
        log_event(LOG_WARN, what, r->str);
}

void hook_attempt_start(hook *h)
{
    h->inflight++;
    if (h->ops->started)
        h->ops->started(h);
}

void hook_attempt_done(hook *h)
{
    h->ops->attempt_done(h);
}

void hook_release(hook *h)
{
    h->ops->release(h);
}

void hook_outcome(hook *h, const char *kind, int64_t pause_ms)
{
    if (h->ops->outcome)
        h->ops->outcome(h, kind, pause_ms);
}

void hook_unclaim(hook *h)
{
    if (h->ops->unclaim)
        h->ops->unclaim(h);
}

static void keep_string(char **dst, size_t *dst_len, const redisReply *r)
{
    if (*dst && *dst_len == r->len && !memcmp(*dst, r->str, r->len))
        return;
    char *c = strndup(r->str, r->len);
    if (!c)
        return; /* the previous one stays: at worst a delivery signed with a rotated secret */
    free(*dst);
    *dst = c;
    *dst_len = r->len;
}

void hook_take_target(hook *h, const redisReply *url, const redisReply *secrets)
{
    keep_string(&h->url, &h->url_len, url);
    keep_string(&h->secrets, &h->secrets_len, secrets);
}

void taken_free(taken *t)
{
    buf_free(&t->body);
    free(t);
}

void hook_queue_free(hook *h)
{
    for (taken *t = h->queue, *next; t; t = next) {
        next = t->next;
        taken_free(t);
    }
    h->queue = NULL;
    h->qtail = &h->queue;
    h->queued = 0;
}

void hook_free(hook *h)
{
    hook_queue_free(h);
    free(h->url);
    free(h->secrets);
    free(h);
}
