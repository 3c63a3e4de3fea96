/* respond: turns store outcomes into HTTP answers. */
#include "api/respond.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/store.h"

static bool starts(const char *s, const char *word, const char **rest)
{
    size_t n = strlen(word);
    if (strncmp(s, word, n) != 0 || (s[n] != ' ' && s[n] != '\0'))
        return false;
    *rest = s[n] ? s + n + 1 : "";
    return true;
}

bool respond_store_failed(request *req, int status, redisReply *reply)
{
    if (status == STORE_TIMEOUT) {
        request_fail(req, 504, "timeout", "The data store did not answer in time.", NULL);
        return true;
    }
    if (status != STORE_OK || !reply) {
        request_fail(req, 503, "unavailable", "The data store is unreachable.", NULL);
        return true;
    }
    if (reply->type != REDIS_REPLY_ERROR)
        return false;
    const char *rest;
    if (starts(reply->str, "NOT_FOUND", &rest))
        request_fail(req, 404, "not_found", rest, NULL);
    else if (starts(reply->str, "FORBIDDEN", &rest))
        request_fail(req, 403, "forbidden", rest, NULL);
    else if (starts(reply->str, "CONFLICT", &rest))
        request_fail(req, 409, "conflict", rest, NULL);
    else if (starts(reply->str, "FULL", &rest) || starts(reply->str, "CONFLICT_AT", &rest)) {
        /* "FULL <field or -> <message>": a size limit of the entity (MAX_*_PER_ENTITY);
         * "CONFLICT_AT <field> <message>": a conflict one input is at (a skill a level names). */
        char field[96];
        const char *sp = strchr(rest, ' ');
        size_t flen = sp ? (size_t)(sp - rest) : strlen(rest);
        snprintf(field, sizeof field, "%.*s", (int)flen, rest);
        request_fail(req, 409, "conflict", sp ? sp + 1 : "The entity is full.",
                     strcmp(field, "-") ? field : NULL);
    } else if (starts(reply->str, "RATE", &rest)) {
        /* "RATE <seconds> <message>": a rate the entity's data sets (contributions). */
        char *end;
        long long secs = strtoll(rest, &end, 10);
        request_fail_retry(req, 429, "rate_limited", *end == ' ' ? end + 1 : "Too many.", secs);
    } else if (starts(reply->str, "INVALID", &rest)) {
        char field[96];
        const char *sp = strchr(rest, ' ');
        size_t flen = sp ? (size_t)(sp - rest) : strlen(rest);
        snprintf(field, sizeof field, "%.*s", (int)flen, rest);
        request_fail(req, 400, "invalid_request", sp ? sp + 1 : "Invalid request.", field);
    } else if (!strncmp(reply->str, "LOADING", 7) || !strncmp(reply->str, "BUSY", 4) ||
               !strncmp(reply->str, "MASTERDOWN", 10) || !strncmp(reply->str, "READONLY", 8) ||
               !strncmp(reply->str, "NOSCRIPT", 8)) {
        /* NOSCRIPT: a script inside a transaction after Redis lost its scripts, which the
         * store is loading again (store.h); the next try finds them. */
        request_fail(req, 503, "unavailable", "The data store is not ready.", NULL);
    } else {
        request_fail_internal(req, reply->str);
    }
    return true;
}

bool respond_store_reply(request *req, int status, redisReply *reply, int type, const char *what)
{
    if (respond_store_failed(req, status, reply))
        return false;
    if (reply->type != type) {
        request_fail_internal(req, what);
        return false;
    }
    return true;
}

json_t *respond_ok(void)
{
    json_t *o = json_object();
    json_object_set_new(o, "success", json_true());
    return o;
}

void respond_deleted(request *req)
{
    json_t *out = respond_ok();
    json_object_set_new(out, "deleted", json_true());
    request_reply(req, 200, out);
}

json_t *respond_string(const redisReply *r)
{
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS))
        return json_string("");
    json_t *s = json_stringn(r->str, r->len);
    return s ? s : json_string("");
}

static buf scratch = BUF_INIT;

buf *respond_scratch(void)
{
    buf_reset(&scratch, 1 << 20);
    return &scratch;
}

void respond_append(buf *b, const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_STRING)
        buf_append(b, r->str, r->len);
    else
        buf_append(b, "null", 4);
}

void respond_send(request *req, int status, buf *b)
{
    slice part = {b->data ? b->data : "", b->len};
    request_reply_parts(req, status, &part, 1);
}
