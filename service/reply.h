/* reply: turns store outcomes (unreachable, late, a script's refusal) into HTTP answers. */
#ifndef ENTITYD_REPLY_H
#define ENTITYD_REPLY_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdbool.h>

#include "buf.h"
#include "request.h"

/* Answers when the store call failed: 503 unreachable, 504 late, a script's error reply mapped
 * by its first word (NOT_FOUND 404, FORBIDDEN 403, CONFLICT 409, INVALID <field> 400; anything
 * else 500). Returns true when it answered, false when `reply` is a normal answer. */
bool reply_store_failed(request *req, int status, redisReply *reply);

/* {"success": true} to add members to. */
json_t *reply_ok(void);

/* A JSON string from bytes that came back from Redis; "" when not valid UTF-8. */
json_t *reply_string(const redisReply *r);

/* A buffer for assembling one response body; emptied by each call (loop thread only). */
buf *reply_scratch(void);
/* Appends a Redis string reply's bytes (stored JSON) to b. */
void reply_append(buf *b, const redisReply *r);
/* Answers with the scratch buffer b as the JSON body. */
void reply_send(request *req, int status, buf *b);

#endif
