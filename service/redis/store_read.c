/* store_read: reads through the read cache (store_read, store_read_exec, store_read_exec_as).
 *
 * store_read_peek, store_read_ticket and store_read_keep let a gated read keep its plain
 * part for every caller (resources/skills.c).
 *
 * A read the cache holds is answered from memory; any other goes to Redis tracked (CLIENT
 * CACHING yes in front), and its answer is kept under a ticket naming the keys it read, so that
 * an invalidation arriving while it is in flight voids it (cache/readcache.h). */
#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/buf.h"
#include "cache/readcache.h"
#include "redis/link.h"
#include "redis/send.h"
#include "redis/store.h"
#include "redis/store_int.h"

/* A read sent tracked: its answer goes to the cache, then to the caller. One allocation: this,
 * then the read's bytes (the cache's key). */
typedef struct read_op {
    store *st;
    store_cb cb;
    void *data;
    readcache_ticket ticket;
    size_t len;
    char read[];
} read_op;

static void on_read_reply(void *data, int status, redisReply *reply)
{
    read_op *ro = data;
    if (status == STORE_OK)
        readcache_put(store_app(ro->st)->reads, &ro->ticket, ro->read, ro->len, reply);
    store_cb cb = ro->cb;
    void *cb_data = ro->data;
    free(ro);
    cb(cb_data, status, reply);
}

/* The read's bytes, as the cache knows it: the commands framed, a transaction marked. */
static buf read_key = BUF_INIT;

/* The keys a read command reads (link_cmd_keys), into its ticket. */
static void ticket_keys(const readcache *rc, readcache_ticket *t, const store_cmd *c)
{
    int first, n = link_cmd_keys(c, &first);
    for (int k = 0; k < n; k++)
        readcache_ticket_key(rc, t, c->argv[first + k], c->lens[first + k]);
}

/* The read itself, to Redis: one command or a transaction, with SEND_* flags. */
static bool send_read(store *st, int send, store_cb cb, void *data, int ncmds,
                      const store_cmd *cmds, bool transaction)
{
    return transaction
               ? store_send_exec(st, send, cb, data, ncmds, cmds)
               : store_send_command(st, send, cb, data, cmds[0].argc, cmds[0].argv, cmds[0].lens);
}

static bool read_through(store *st, int flags, const char *key, size_t key_len, store_cb cb,
                         void *data, int ncmds, const store_cmd *cmds, bool transaction)
{
    readcache *rc = store_app(st)->reads;
    /* A NO_HIT read follows a command of the same request already sent (its revocation
     * check), which must be answered first: shedding the read alone would answer the
     * request while that command is still out. That command kept room for it (RESERVE). */
    int send = (flags & STORE_READ_NO_HIT) ? SEND_ANY_CAP : 0;
    if (flags & STORE_READ_RESERVE)
        send |= SEND_RESERVE;
    if (!readcache_enabled(rc) || !store_link_ready(st))
        return send_read(st, send, cb, data, ncmds, cmds, transaction);
    if (!key) {
        buf_reset(&read_key, 1 << 20);
        if (transaction)
            buf_append_str(&read_key, "MULTI\r\n");
        for (int i = 0; i < ncmds; i++)
            link_frame(&read_key, cmds[i].argc, cmds[i].argv, cmds[i].lens);
        key = read_key.data;
        key_len = read_key.len;
    }
    if (!(flags & STORE_READ_NO_HIT)) {
        if ((flags & STORE_READ_FRESH) && st->fresh)
            st->fresh(st->fresh_ctx);
        const redisReply *hit = readcache_enabled(rc) ? readcache_get(rc, key, key_len) : NULL;
        if (hit) {
            /* Handed out read-only: store callbacks only read replies. */
            cb(data, STORE_OK, (redisReply *)hit);
            return true;
        }
    }
    read_op *ro = malloc(sizeof *ro + key_len);
    if (!ro) {
        /* Sent untracked, its keys' changes would go unheard: nothing read before may be
         * trusted past it (a find page marks its keys as it reads, cache/findcache.h). */
        readcache_flush(rc);
        return send_read(st, send, cb, data, ncmds, cmds, transaction);
    }
    ro->st = st;
    ro->cb = cb;
    ro->data = data;
    ro->len = key_len;
    memcpy(ro->read, key, key_len);
    readcache_ticket_begin(rc, &ro->ticket);
    for (int i = 0; i < ncmds; i++)
        ticket_keys(rc, &ro->ticket, &cmds[i]);
    /* The caller learns only whether its callback ran; on_read_reply runs exactly once. */
    return send_read(st, send | SEND_TRACK, on_read_reply, ro, ncmds, cmds, transaction);
}

void store_set_fresh(store *st, void (*fn)(void *ctx), void *ctx)
{
    st->fresh = fn;
    st->fresh_ctx = ctx;
}

bool store_read(store *st, int flags, store_cb cb, void *data, int argc, const char **argv,
                const size_t *lens)
{
    store_cmd one = {argc, argv, lens};
    return read_through(st, flags, NULL, 0, cb, data, 1, &one, false);
}

bool store_read_exec(store *st, int flags, store_cb cb, void *data, int ncmds,
                     const store_cmd *cmds)
{
    return read_through(st, flags, NULL, 0, cb, data, ncmds, cmds, true);
}

bool store_read_exec_as(store *st, int flags, const char *key, size_t key_len, store_cb cb,
                        void *data, int ncmds, const store_cmd *cmds)
{
    return read_through(st, flags, key, key_len, cb, data, ncmds, cmds, true);
}

const redisReply *store_read_peek(store *st, int argc, const char **argv, const size_t *lens)
{
    readcache *rc = store_app(st)->reads;
    if (!readcache_enabled(rc) || !store_link_ready(st))
        return NULL;
    buf_reset(&read_key, 1 << 20);
    link_frame(&read_key, argc, argv, lens);
    return readcache_get(rc, read_key.data, read_key.len);
}

void store_read_ticket(store *st, readcache_ticket *t, int argc, const char **argv,
                       const size_t *lens)
{
    readcache *rc = store_app(st)->reads;
    t->nkeys = -1; /* void unless the cache is on */
    if (!readcache_enabled(rc))
        return;
    readcache_ticket_begin(rc, t);
    store_cmd one = {argc, argv, lens};
    ticket_keys(rc, t, &one);
}

void store_read_keep(store *st, const readcache_ticket *t, int argc, const char **argv,
                     const size_t *lens, const redisReply *reply)
{
    readcache *rc = store_app(st)->reads;
    if (!rc || t->nkeys < 0)
        return;
    buf_reset(&read_key, 1 << 20);
    link_frame(&read_key, argc, argv, lens);
    readcache_put(rc, t, read_key.data, read_key.len, reply);
}
