/* session: a session token used as a request's credential (CONTRACT section 13): the check of
 * its record in Redis, the check's answer, and the minute it was last used. No session state is
 * kept in the process, so a session ended on one instance is refused by every instance on its
 * next request. */
#ifndef ENTITYD_SESSION_H
#define ENTITYD_SESSION_H

#include <stdbool.h>

#include "auth/auth.h"
#include "auth/token.h"
#include "http/request.h"
#include "redis/store.h"

/* What the check of a token found. */
enum session_verdict {
    SESSION_LIVE = 0,
    SESSION_DEAD,        /* no record, another token's record, or expired */
    SESSION_TIMEOUT,     /* the store did not answer in time */
    SESSION_UNAVAILABLE, /* the store failed, or answered something else */
};

/* Sends `HMGET auth:sess:{<address>} <id> u:<id>` for the token through the read cache, as the
 * revocation check, with store_read's flags (STORE_READ_RESERVE just ahead of a read of the
 * request, which then follows on the same connection). Returns true when cb has already run. */
bool session_send(request *req, const token *t, int flags, store_cb cb, void *data);

/* The HMGET's answer: an enum session_verdict. A live session whose lastUsedAt is older than
 * the current minute is touched (redis/lua/session_touch.lua, fire and forget): at most one
 * write a minute per session and instance, none for a session that has ended. */
int session_answer(request *req, const token *t, int status, const redisReply *reply);

/* For a read route signed in by a session (req->auth's token): the check rides just ahead of
 * the handler's first read (auth/deferred.c); a session that is not live then overrides the
 * handler's answer (req->auth_veto). */
void session_defer(request *req);

#endif
