/* auth deferred: a credential's check that a read route leaves to ride just ahead of the
 * handler's own read (req->before_read, run by request_read_flags): one round trip, and the one
 * connection answers the check first, so its veto is in place before the read's callback. The
 * signature's revocation check (revocation.c) and a session token's check (session.c) are two
 * such checks; this file is the riding, written once. */
#include "auth/auth_int.h"

/* The check came after the handler started: its outcome overrides the handler's answer. */
static void deferred_on_answer(void *data, int status, redisReply *reply)
{
    request *req = data;
    int veto = req->auth->rider->veto(req, status, reply);
    if (veto)
        req->auth_veto = veto;
}

/* req->before_read: queues the check ahead of the handler's read. Returns the flags for that
 * read: when the check went to Redis, the read must not be answered from the read cache, which
 * would answer it first. Room is kept for the read that follows, which is never shed. */
static int deferred_send(request *req)
{
    bool answered = req->auth->rider->send(req, STORE_READ_RESERVE, deferred_on_answer, req);
    return answered ? 0 : STORE_READ_NO_HIT;
}

void auth_defer(request *req, const auth_deferred *d)
{
    req->auth->rider = d;
    req->before_read = deferred_send;
}

typedef struct deferred_then {
    request *req;
    auth_next next;
} deferred_then;

static void deferred_on_then(void *data, int status, redisReply *reply)
{
    deferred_then *t = data;
    deferred_on_answer(t->req, status, reply);
    t->next(t->req);
}

void auth_check_revocation(request *req, auth_next next)
{
    if (!req->before_read) {
        next(req);
        return;
    }
    req->before_read = NULL; /* made here instead, alone */
    deferred_then *t = arena_alloc(&req->pool, sizeof *t);
    if (!t) {
        request_fail_internal(req, "out of memory");
        return;
    }
    *t = (deferred_then){req, next};
    req->auth->rider->send(req, 0, deferred_on_then, t);
}
