/* respond: turns store outcomes (unreachable, late, a script's refusal) into HTTP answers. */
#ifndef ENTITYD_RESPOND_H
#define ENTITYD_RESPOND_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdbool.h>

#include "core/buf.h"
#include "http/request.h"

/* Answers when the store call failed: 503 unreachable, 504 late, a script's error reply mapped
 * by its first word (NOT_FOUND 404, FORBIDDEN 403, CONFLICT 409, CONFLICT_AT <field> and
 * FULL <field> 409, INVALID <field> 400; anything else 500). Returns true when it answered, false
 * when `reply` is a normal answer. */
bool respond_store_failed(request *req, int status, redisReply *reply);
/* Whether the store answered with a reply of `type` (REDIS_REPLY_*): true goes on with it;
 * false when the request was answered, as respond_store_failed does, or with a 500 whose log
 * line says `what` when the reply has another type. */
bool respond_store_reply(request *req, int status, redisReply *reply, int type, const char *what);

/* {"success": true} to add members to. */
json_t *respond_ok(void);
/* Answers a delete that went through: 200 {"success": true, "deleted": true}. */
void respond_deleted(request *req);

/* A JSON string from bytes that came back from Redis; "" when not valid UTF-8. */
json_t *respond_string(const redisReply *r);

/* A buffer for assembling one response body; emptied by each call (loop thread only). */
buf *respond_scratch(void);
/* Appends a Redis string reply's bytes (stored JSON) to b. */
void respond_append(buf *b, const redisReply *r);
/* Answers with the scratch buffer b as the JSON body. */
void respond_send(request *req, int status, buf *b);

#endif
