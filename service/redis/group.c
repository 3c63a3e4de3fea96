/* group: see group.h. A batch is open while its turn lasts; the check phase takes every open
 * batch off the list and sends it; its answer frees it. */
#include "redis/group.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/isotime.h"
#include "redis/store.h"

/* One queued call: its callback and its own keys and arguments, copied behind it. */
typedef struct group_call {
    store_cb cb;
    void *data;
    int nkeys, nargs;
    const char **argv;
    size_t *lens;
} group_call;

/* Calls of one script with one shared part. The shared part is copied from the first call. */
typedef struct group_batch {
    struct group_batch *next;
    int script, nshared_keys, nshared_args;
    const char **shared;
    size_t *shared_lens;
    size_t bytes;
    int ncalls;
    group_call *calls[GROUP_MAX_CALLS];
} group_batch;

struct group {
    uv_check_t check;
    uv_idle_t wake; /* active while a batch is open: the poll before the check does not block */
    struct store *st;
    group_batch *open, *last; /* queued this turn, in arrival order */
    bool flushing;            /* on_check is sending: it takes what callbacks add too */
    bool closed;              /* group_close ran: every call leaves at once, alone */
    bool have_now;            /* now_ms was read this turn (group_now_ms); on_check forgets it */
    int64_t now_ms;
};

/* Copies n strings into one allocation after `head` bytes: the pointers, the lengths, then
 * the bytes. Returns the allocation; *argv and *lens point into it. */
static void *copy_strings(size_t head, int n, const char **src, const size_t *src_lens,
                          const char ***argv, size_t **lens, size_t *bytes)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += src_lens[i];
    char *mem = malloc(head + (size_t)n * (sizeof(char *) + sizeof(size_t)) + total + 1);
    if (!mem)
        return NULL;
    *argv = (const char **)(mem + head);
    *lens = (size_t *)(*argv + n);
    char *p = (char *)(*lens + n);
    for (int i = 0; i < n; i++) {
        memcpy(p, src[i], src_lens[i]);
        (*argv)[i] = p;
        (*lens)[i] = src_lens[i];
        p += src_lens[i];
    }
    *bytes = total;
    return mem;
}

static void batch_free(group_batch *b)
{
    for (int i = 0; i < b->ncalls; i++)
        free(b->calls[i]);
    free(b);
}

/* The answer of a group that Redis sent as a whole, not per call. */
static redisReply malformed = {.type = REDIS_REPLY_ERROR,
                               .str = "ERR the group's answer does not have one reply per call",
                               .len = 55};

static void on_batch_reply(void *data, int status, redisReply *reply)
{
    group_batch *b = data;
    bool each = status == STORE_OK && reply && reply->type == REDIS_REPLY_ARRAY;
    if (each && reply->elements != (size_t)b->ncalls) {
        each = false;
        reply = &malformed;
    }
    /* A callback may queue a new call: that goes to a new batch, never to this one. */
    for (int i = 0; i < b->ncalls; i++)
        b->calls[i]->cb(b->calls[i]->data, status, each ? reply->element[i] : reply);
    batch_free(b);
}

/* Sends one batch as one EVALSHA; b belongs to the store's callback from here on. */
static void batch_send(group *g, group_batch *b)
{
    int nkeys = b->nshared_keys, argc = b->nshared_keys + b->nshared_args + 1;
    for (int i = 0; i < b->ncalls; i++) {
        nkeys += b->calls[i]->nkeys;
        argc += 2 + b->calls[i]->nkeys + b->calls[i]->nargs;
    }
    const char **argv = malloc((size_t)argc * sizeof *argv);
    size_t *lens = malloc((size_t)argc * sizeof *lens);
    char counts[1 + 2 * GROUP_MAX_CALLS][BUF_INT_SIZE];
    if (!argv || !lens) {
        free(argv);
        free(lens);
        on_batch_reply(b, STORE_UNAVAILABLE, NULL);
        return;
    }
    int k = 0, a = nkeys; /* keys fill argv[0, nkeys), arguments the rest */
    for (int i = 0; i < b->nshared_keys; i++, k++)
        argv[k] = b->shared[i], lens[k] = b->shared_lens[i];
    for (int i = 0; i < b->nshared_args; i++, a++)
        argv[a] = b->shared[b->nshared_keys + i], lens[a] = b->shared_lens[b->nshared_keys + i];
    int c = 0;
    lens[a] = buf_format_int(counts[c], b->ncalls);
    argv[a++] = counts[c++];
    for (int i = 0; i < b->ncalls; i++) {
        group_call *call = b->calls[i];
        for (int j = 0; j < call->nkeys; j++, k++)
            argv[k] = call->argv[j], lens[k] = call->lens[j];
        lens[a] = buf_format_int(counts[c], call->nkeys);
        argv[a++] = counts[c++];
        lens[a] = buf_format_int(counts[c], call->nargs);
        argv[a++] = counts[c++];
        for (int j = 0; j < call->nargs; j++, a++)
            argv[a] = call->argv[call->nkeys + j], lens[a] = call->lens[call->nkeys + j];
    }
    /* store_script copies everything before it returns */
    store_script(g->st, b->script, on_batch_reply, b, nkeys, argc, argv, lens);
    free(argv);
    free(lens);
}

static void on_wake(uv_idle_t *h)
{
    (void)h; /* being active is its whole job */
}

static void on_check(uv_check_t *h)
{
    group *g = h->data;
    uv_check_stop(&g->check);
    uv_idle_stop(&g->wake);
    g->have_now = false;
    g->flushing = true;
    /* A batch answered at once (store not ready, load shed) may lead its callers to queue
     * more: those leave in this same pass. */
    while (g->open) {
        group_batch *b = g->open;
        g->open = b->next;
        if (!g->open)
            g->last = NULL;
        batch_send(g, b);
    }
    g->flushing = false;
}

static bool batch_matches(const group_batch *b, int script, int nshared_keys, int nshared_args,
                          const char **argv, const size_t *lens, size_t bytes)
{
    if (b->script != script || b->nshared_keys != nshared_keys || b->nshared_args != nshared_args ||
        b->ncalls == GROUP_MAX_CALLS || b->bytes + bytes > GROUP_MAX_BYTES)
        return false;
    for (int i = 0; i < nshared_keys + nshared_args; i++)
        if (b->shared_lens[i] != lens[i] || memcmp(b->shared[i], argv[i], lens[i]))
            return false;
    return true;
}

static void queue(group *g, bool now, int script, store_cb cb, void *data, int nshared_keys,
                  int nshared_args, int nkeys, int argc, const char **argv, const size_t *lens)
{
    int nshared = nshared_keys + nshared_args;
    group_call *call;
    const char **cargv;
    size_t *clens, bytes;
    call = copy_strings(sizeof *call, argc - nshared, argv + nshared, lens + nshared, &cargv,
                        &clens, &bytes);
    if (!call) {
        cb(data, STORE_UNAVAILABLE, NULL);
        return;
    }
    *call = (group_call){cb, data, nkeys, argc - nshared - nkeys, cargv, clens};
    group_batch *b = now ? NULL : g->open;
    while (b && !batch_matches(b, script, nshared_keys, nshared_args, argv, lens, bytes))
        b = b->next;
    if (!b) {
        const char **sargv;
        size_t *slens, sbytes;
        b = copy_strings(sizeof *b, nshared, argv, lens, &sargv, &slens, &sbytes);
        if (!b) {
            free(call);
            cb(data, STORE_UNAVAILABLE, NULL);
            return;
        }
        *b = (group_batch){.script = script,
                           .nshared_keys = nshared_keys,
                           .nshared_args = nshared_args,
                           .shared = sargv,
                           .shared_lens = slens};
        if (now || g->closed) {
            b->calls[b->ncalls++] = call;
            batch_send(g, b);
            return;
        }
        if (g->last)
            g->last->next = b;
        else
            g->open = b;
        g->last = b;
    }
    b->calls[b->ncalls++] = call;
    b->bytes += bytes;
    if (!g->flushing && !uv_is_active((uv_handle_t *)&g->wake)) {
        /* queued by a timer, the batch would otherwise wait out the poll's timeout */
        uv_idle_start(&g->wake, on_wake);
        uv_check_start(&g->check, on_check);
    }
}

void group_script(group *g, int script, store_cb cb, void *data, int nshared_keys, int nshared_args,
                  int nkeys, int argc, const char **argv, const size_t *lens)
{
    queue(g, false, script, cb, data, nshared_keys, nshared_args, nkeys, argc, argv, lens);
}

void group_script_alone(group *g, int script, store_cb cb, void *data, int nshared_keys,
                        int nshared_args, int nkeys, int argc, const char **argv,
                        const size_t *lens)
{
    queue(g, true, script, cb, data, nshared_keys, nshared_args, nkeys, argc, argv, lens);
}

int64_t group_now_ms(group *g)
{
    if (g->flushing || g->closed)
        return isotime_now_ms();
    if (!g->have_now) {
        g->now_ms = isotime_now_ms();
        g->have_now = true;
        /* the check phase ends the turn's time even when no call follows */
        if (!uv_is_active((uv_handle_t *)&g->check))
            uv_check_start(&g->check, on_check);
    }
    return g->now_ms;
}

group *group_new(uv_loop_t *loop, struct store *st)
{
    group *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    uv_check_init(loop, &g->check);
    uv_idle_init(loop, &g->wake);
    uv_unref((uv_handle_t *)&g->wake);
    g->check.data = g->wake.data = g;
    g->st = st;
    return g;
}

void group_close(group *g)
{
    if (!g || g->closed)
        return;
    on_check(&g->check);
    g->closed = true;
    uv_close((uv_handle_t *)&g->check, NULL);
    uv_close((uv_handle_t *)&g->wake, NULL);
}

void group_free(group *g)
{
    free(g);
}
