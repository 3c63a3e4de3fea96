/* event: an event stream entry as GET /events, streams and webhooks show it (event.h). */
#include "push/event.h"

#include <string.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

static bool all_digits(const char *s, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

bool event_id_valid(const char *s, size_t len)
{
    const char *dash = len ? memchr(s, '-', len) : NULL;
    if (!dash || len > EVENT_ID_MAX)
        return false;
    const char *parts[2] = {s, dash + 1};
    size_t lens[2] = {(size_t)(dash - s), len - (size_t)(dash - s) - 1};
    for (int i = 0; i < 2; i++) {
        if (!all_digits(parts[i], lens[i]) || lens[i] > 20)
            return false;
        if (lens[i] == 20 && memcmp(parts[i], "18446744073709551615", 20) > 0)
            return false;
    }
    return true;
}

/* Compares two digit strings as numbers (leading zeros allowed). */
static int num_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    while (an > 1 && *a == '0')
        a++, an--;
    while (bn > 1 && *b == '0')
        b++, bn--;
    if (an != bn)
        return an < bn ? -1 : 1;
    return memcmp(a, b, an);
}

int event_id_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    const char *da = memchr(a, '-', alen), *db = memchr(b, '-', blen);
    int c = num_cmp(a, (size_t)(da - a), b, (size_t)(db - b));
    if (c)
        return c;
    return num_cmp(da + 1, alen - (size_t)(da - a) - 1, db + 1, blen - (size_t)(db - b) - 1);
}

bool event_parse(const redisReply *e, event_view *ev)
{
    memset(ev, 0, sizeof *ev);
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_STRING ||
        !event_id_valid(e->element[0]->str, e->element[0]->len) ||
        e->element[1]->type != REDIS_REPLY_ARRAY)
        return false;
    ev->id = e->element[0]->str;
    ev->id_len = e->element[0]->len;
    ev->type = ev->at = ev->actor = ev->data = "";
    const redisReply *fields = e->element[1];
    for (size_t j = 0; j + 1 < fields->elements; j += 2) {
        const redisReply *k = fields->element[j], *v = fields->element[j + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        if (!strcmp(k->str, "type"))
            ev->type = v->str, ev->type_len = v->len;
        else if (!strcmp(k->str, "at"))
            ev->at = v->str, ev->at_len = v->len;
        else if (!strcmp(k->str, "actor"))
            ev->actor = v->str, ev->actor_len = v->len;
        else if (!strcmp(k->str, "data"))
            ev->data = v->str, ev->data_len = v->len;
    }
    /* The object the write script stored as text, embedded as JSON once it parses. */
    json_t *obj = ev->data_len ? json_loadb(ev->data, ev->data_len, 0, NULL) : NULL;
    ev->data_ok = json_is_object(obj);
    ev->data_fields = ev->data_ok && json_object_size(obj) > 0;
    json_decref(obj);
    return true;
}

static void append_actor(buf *b, const event_view *ev)
{
    if (ev->actor_len) {
        buf_append(b, "\"", 1);
        buf_append_json_escaped(b, ev->actor, ev->actor_len);
        buf_append(b, "\"", 1);
    } else {
        buf_append_str(b, "null");
    }
}

int event_render_item(buf *b, const event_view *ev)
{
    buf_append_str(b, "{\"id\":\"");
    buf_append(b, ev->id, ev->id_len);
    buf_append_str(b, "\",\"type\":\"");
    buf_append_json_escaped(b, ev->type, ev->type_len);
    buf_append_str(b, "\",\"at\":\"");
    buf_append_json_escaped(b, ev->at, ev->at_len);
    buf_append_str(b, "\",\"actor\":");
    append_actor(b, ev);
    buf_append_str(b, ",\"data\":");
    if (ev->data_ok)
        buf_append(b, ev->data, ev->data_len);
    else
        buf_append_str(b, "{}");
    return buf_append(b, "}", 1);
}

int event_render_webhook(buf *b, const char *entity_id, const event_view *ev)
{
    buf_append_str(b, "{\"type\":\"");
    buf_append_json_escaped(b, ev->type, ev->type_len);
    buf_append_str(b, "\",\"timestamp\":\"");
    buf_append_json_escaped(b, ev->at, ev->at_len);
    buf_append_str(b, "\",\"data\":{\"entityID\":\"");
    buf_append_json_escaped(b, entity_id, strlen(entity_id));
    buf_append_str(b, "\",\"eventId\":\"");
    buf_append(b, ev->id, ev->id_len);
    buf_append_str(b, "\",\"actor\":");
    append_actor(b, ev);
    /* The event's own fields follow, after its object's opening brace. */
    if (ev->data_fields) {
        const char *p = memchr(ev->data, '{', ev->data_len);
        buf_append(b, ",", 1);
        buf_append(b, p + 1, ev->data_len - (size_t)(p + 1 - ev->data));
    } else {
        buf_append(b, "}", 1);
    }
    return buf_append(b, "}", 1);
}
