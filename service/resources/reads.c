/* reads: what the progression reads share (progress.c, leaderboard.c, events.c). */
#include <stdio.h>
#include <string.h>

#include "resources/reads.h"
#include "api/respond.h"
#include "auth/auth.h"
#include "core/app.h"
#include "redis/store.h"

bool reads_events_gate(request *req, const redisReply *r, const char *what)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 4 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements != 3 ||
        r->element[1]->type != REDIS_REPLY_INTEGER || r->element[2]->type != REDIS_REPLY_INTEGER) {
        request_fail_internal(req, what);
        return false;
    }
    const redisReply *f = r->element[0];
    if (f->element[0]->type == REDIS_REPLY_NIL) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return false;
    }
    bool enabled = entity_flag(f->element[1]), owner = r->element[1]->integer != 0,
         admin = r->element[2]->integer != 0;
    if (reads_is_platform(req))
        return true;
    if (!enabled && !owner) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return false;
    }
    if (!owner && !admin) {
        request_fail(req, 403, "forbidden",
                     "Only the entity's owners and admins may read its events.", NULL);
        return false;
    }
    return true;
}

bool reads_is_platform(request *req)
{
    return auth_is_platform_admin(req->app->auth, req->caller);
}

bool reads_all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return n > 0;
}

bool reads_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

bool reads_limit(request *req, long max, long def, long *out)
{
    size_t len;
    const char *lp = request_param(req, "limit", &len);
    *out = def;
    if (!lp)
        return true;
    long limit = 0;
    for (size_t i = 0; i < len && limit <= max; i++)
        limit = lp[i] >= '0' && lp[i] <= '9' ? limit * 10 + (lp[i] - '0') : max + 1;
    if (!len || limit < 1 || limit > max) {
        char msg[64];
        snprintf(msg, sizeof msg, "limit must be an integer from 1 to %ld.", max);
        request_fail_field(req, "limit", msg);
        return false;
    }
    *out = limit;
    return true;
}

void reads_desc_add(reads_desc *d, const char *s, size_t len)
{
    d->s[d->len++] = (char)len;
    memcpy(d->s + d->len, s, len);
    d->len += len;
}

/* The read rule over {id, isEnabled, public, ...} and the caller's role; or the member
 * themself on an enabled entity. */
static entity_read member_access(request *req, const redisReply *f, const redisReply *const *roles,
                                 bool self)
{
    if (f->element[0]->type == REDIS_REPLY_NIL) {
        request_fail(req, 404, "not_found", "No such entity.", NULL);
        return ENTITY_READ_ANSWERED;
    }
    int role = roles[0]->integer   ? ROLE_OWNER
               : roles[1]->integer ? ROLE_ADMIN
               : roles[2]->integer ? ROLE_MEMBER
                                   : ROLE_NONE;
    bool enabled = entity_flag(f->element[1]), is_public = entity_flag(f->element[2]);
    int rule =
        entity_read_rule(enabled, is_public, role, reads_is_platform(req), req->signed_in, false);
    if (rule == 403 && self)
        rule = 0;
    if (rule == 0)
        return ENTITY_READ_OK;
    entity_fail_read(req, rule);
    return ENTITY_READ_ANSWERED;
}

/* Checks a read's EXEC reply: {the read's first reply, the role lookups, the rest}, nreplies
 * in all, the first an array of at least `min` whose first three are {id, isEnabled, public}. */
entity_read reads_reply(request *req, int status, const redisReply *r, size_t nreplies, size_t min,
                        bool self)
{
    if (respond_store_failed(req, status, (redisReply *)r))
        return ENTITY_READ_ANSWERED;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == nreplies &&
        r->element[0]->type == REDIS_REPLY_ERROR) {
        /* a script's error inside the transaction (NOSCRIPT after a flush: 503, and reloaded) */
        respond_store_failed(req, STORE_OK, r->element[0]);
        return ENTITY_READ_ANSWERED;
    }
    /* Refused, a gated read (entity_gate) or progress.lua answers the flags and the role
     * lookups alone: judged first, then the rest must be there. */
    bool ok = r->type == REDIS_REPLY_ARRAY &&
              (r->elements == nreplies || r->elements == 1 + ENTITY_ROLE_CMDS) &&
              r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements >= 3;
    for (int i = 1; ok && i <= ENTITY_ROLE_CMDS; i++)
        ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (!ok) {
        request_fail_internal(req, "progression read: unexpected reply");
        return ENTITY_READ_ANSWERED;
    }
    entity_read e =
        member_access(req, r->element[0], (const redisReply *const *)r->element + 1, self);
    if (e == ENTITY_READ_OK && (r->elements != nreplies || r->element[0]->elements < min)) {
        request_fail_internal(req, "progression read: unexpected reply");
        return ENTITY_READ_ANSWERED;
    }
    return e;
}

void reads_append_int(buf *b, int64_t v)
{
    if (v < 0) {
        buf_append(b, "-", 1);
        buf_append_uint(b, (unsigned long long)-(v + 1) + 1);
        return;
    }
    buf_append_uint(b, (unsigned long long)v);
}
