/* event: one entry of an entity's event stream (keys.h, ent:{c-…}:events) as each reader shows
 * it: an item of GET /events (the same bytes a stream's "data:" carries) and the body of a
 * webhook delivery (CONTRACT section 14). */
#ifndef ENTITYD_PUSH_EVENT_H
#define ENTITYD_PUSH_EVENT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

struct redisReply;

/* A stream id "<ms>-<seq>", both parts up to 20 digits. */
#define EVENT_ID_MAX 41

/* An entry's parts, pointing into the reply it was read from. */
typedef struct event_view {
    const char *id, *type, *at, *actor, *data;
    size_t id_len, type_len, at_len, actor_len, data_len; /* actor_len 0: none */
    bool data_ok;     /* data is a JSON object (otherwise shown as {}) */
    bool data_fields; /* … with at least one field */
} event_view;

/* True when s is "<ms>-<seq>", each part 1 to 20 digits within 64 bits. */
bool event_id_valid(const char *s, size_t len);
/* Compares two valid event ids by their numbers (<0, 0, >0). */
int event_id_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Reads one XRANGE entry ([id, [field, value, …]]); false when it is not one. */
bool event_parse(const struct redisReply *entry, event_view *ev);

/* {"id","type","at","actor","data"}: an item of GET /events. */
int event_render_item(buf *b, const event_view *ev);
/* {"type","timestamp","data":{"entityID","eventId","actor",…the event's data}}: a webhook
 * delivery's body. */
int event_render_webhook(buf *b, const char *entity_id, const event_view *ev);

#endif
