/* redis_uv: hiredis's async context on the libuv loop.
 *
 * hiredis asks for a writable event each time a command is queued. The stock adapter re-arms
 * epoll for it (two epoll_ctl calls per batch) and writes on the next wakeup. Here, while
 * connected, a queued command only marks a flush due for the loop's check phase, after every
 * callback of this iteration has run: all the commands of the iteration leave in one write(),
 * with no epoll change. Only a write that cannot finish waits for a writable event. The check
 * handle stays active (unreferenced, so it keeps no loop alive): libuv runs the check handles
 * started last first, and one started during the check phase only in the next iteration, so a
 * handle started on demand here would miss the commands that other check callbacks queue (the
 * script groups, group.h) and leave them until the next wakeup. The check phase comes after
 * the poll, so a command queued before it (by a timer) would wait for the next wakeup, up to
 * the store's tick, 20 ms later: while a flush is due an idle handle is active, which makes that
 * poll return at once. A socket error reported by the poll is handed to hiredis as a read, so
 * it sees the failure and disconnects (the stock adapter ignores it). */
#include "redis/redis_uv.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct redis_uv {
    redisAsyncContext *ac; /* NULL once hiredis let go */
    uv_poll_t poll;
    uv_check_t check;
    uv_idle_t wake; /* active while a flush is due: the poll before the check does not block */
    int events;     /* what the poll watches */
    bool flush_due; /* a flush is scheduled for the check phase */
    bool in_flush;  /* redisAsyncHandleWrite is on the stack */
    int open_handles;
} redis_uv;

static void on_poll(uv_poll_t *h, int status, int events);

static void poll_events(redis_uv *r, int events)
{
    if (events == r->events || !r->ac)
        return;
    r->events = events;
    if (events)
        uv_poll_start(&r->poll, events, on_poll);
    else
        uv_poll_stop(&r->poll);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    redis_uv *r = h->data;
    if (status < 0)
        events = UV_READABLE; /* the read finds the error */
    if (r->ac && (events & UV_READABLE))
        redisAsyncHandleRead(r->ac);
    if (r->ac && (events & UV_WRITABLE))
        redisAsyncHandleWrite(r->ac);
}

static void on_wake(uv_idle_t *h)
{
    (void)h; /* being active is its whole job */
}

static void on_check(uv_check_t *h)
{
    redis_uv *r = h->data;
    if (!r->flush_due)
        return;
    r->flush_due = false;
    uv_idle_stop(&r->wake);
    if (!r->ac)
        return;
    r->in_flush = true;
    redisAsyncHandleWrite(r->ac);
    r->in_flush = false;
}

static void add_read(void *p)
{
    redis_uv *r = p;
    poll_events(r, r->events | UV_READABLE);
}

static void del_read(void *p)
{
    redis_uv *r = p;
    poll_events(r, r->events & ~UV_READABLE);
}

static void add_write(void *p)
{
    redis_uv *r = p;
    bool connected = r->ac && (r->ac->c.flags & REDIS_CONNECTED);
    if (connected && !r->in_flush) {
        if (!r->flush_due)
            uv_idle_start(&r->wake, on_wake);
        r->flush_due = true;
        return;
    }
    /* Connecting (the writable event completes the connect) or a partial write. */
    poll_events(r, r->events | UV_WRITABLE);
}

static void del_write(void *p)
{
    redis_uv *r = p;
    poll_events(r, r->events & ~UV_WRITABLE);
}

static void on_closed(uv_handle_t *h)
{
    redis_uv *r = h->data;
    if (--r->open_handles == 0)
        free(r);
}

static void cleanup(void *p)
{
    redis_uv *r = p;
    r->ac = NULL;
    uv_close((uv_handle_t *)&r->poll, on_closed);
    uv_close((uv_handle_t *)&r->check, on_closed);
    uv_close((uv_handle_t *)&r->wake, on_closed);
}

int redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    if (ac->ev.data)
        return REDIS_ERR;
    redis_uv *r = calloc(1, sizeof *r);
    if (!r)
        return REDIS_ERR;
    if (uv_poll_init(loop, &r->poll, ac->c.fd) != 0) {
        free(r);
        return REDIS_ERR;
    }
    uv_check_init(loop, &r->check);
    uv_check_start(&r->check, on_check);
    uv_unref((uv_handle_t *)&r->check);
    uv_idle_init(loop, &r->wake);
    uv_unref((uv_handle_t *)&r->wake);
    r->poll.data = r->check.data = r->wake.data = r;
    r->open_handles = 3;
    r->ac = ac;
    ac->ev.data = r;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    return REDIS_OK;
}

redisAsyncContext *redis_uv_connect(uv_loop_t *loop, const char *numeric, int port, void *data,
                                    redisReplyObjectFunctions *fn, redisConnectCallback *on_connect,
                                    redisDisconnectCallback *on_disconnect)
{
    redisAsyncContext *ac = redisAsyncConnect(numeric, port);
    if (!ac || ac->err) {
        if (ac)
            redisAsyncFree(ac);
        return NULL;
    }
    ac->data = data;
    if (fn)
        ac->c.reader->fn = fn;
    if (redis_uv_attach(ac, loop) != REDIS_OK) {
        redisAsyncFree(ac);
        return NULL;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    return ac;
}
