/* watch: see watch.h.
 *
 * A watched entity is in one table by its id and holds its subscribers. Its events key is read
 * with XLEN through the store (store_read: tracked, CLIENT CACHING yes in front, so Redis
 * sends an invalidation after the key's next write); the read cache's listener hears that
 * invalidation, the entity is marked, and at the loop's next turn (an idle handle, so every
 * invalidation read in one poll is one call) the key is read again and the subscribers are
 * called. The read goes out before the calls: a subscriber's own read of the stream is sent
 * after it on the same connection (the same node in a cluster, the key's), so a write it does
 * not see comes after the tracked read and is invalidated again.
 *
 * An entity's memory is kept while anything refers to it: a subscriber, its read in flight,
 * or its place on the list to call; entity_release frees it when the last goes. */
#include "push/watch.h"

#include <stdlib.h>
#include <string.h>

#include "core/app.h"
#include "core/hash.h"
#include "cache/readcache.h"
#include "redis/keys.h"
#include "redis/store.h"

#define ENTITY_ID_MAX 40

typedef struct went went;

struct watch_sub {
    went *e;
    watch_cb cb;
    void *data;
    watch_sub *prev, *next;
};

struct went {
    watch *w;
    went *hnext; /* the table's chain */
    went *dnext; /* the list of entities to call, while marked */
    watch_sub *subs;
    watch_sub *cursor;    /* the next subscriber a call loop visits; moved past one removed */
    int refs;             /* subscribers + read in flight + the list to call */
    bool marked;          /* on the list to call */
    bool reading, reread; /* a read in flight; another wanted when it is answered */
    bool tracked;         /* the last read was answered: Redis tracks the key for us */
    char key[KEYS_ENTITY_SIZE];
    size_t key_len;
    char id[ENTITY_ID_MAX];
};

struct watch {
    app *a;
    went **table;
    size_t nbuckets, count;
    went *marked; /* to call at the next idle turn */
    uv_idle_t idle;
    uv_timer_t poll;
    bool closed;
};

static went **bucket(watch *w, const char *id, size_t len)
{
    return &w->table[hash_fnv1a(id, len) & (w->nbuckets - 1)];
}

static went *find(watch *w, const char *id, size_t len)
{
    for (went *e = *bucket(w, id, len); e; e = e->hnext)
        if (strlen(e->id) == len && !memcmp(e->id, id, len))
            return e;
    return NULL;
}

/* Doubles the table past one entity per bucket; on failure the chains just grow longer. */
static void grow(watch *w)
{
    if (w->count < w->nbuckets)
        return;
    size_t n = w->nbuckets * 2;
    went **t = calloc(n, sizeof *t);
    if (!t)
        return;
    for (size_t i = 0; i < w->nbuckets; i++)
        for (went *e = w->table[i], *next; e; e = next) {
            next = e->hnext;
            went **b = &t[hash_fnv1a(e->id, strlen(e->id)) & (n - 1)];
            e->hnext = *b;
            *b = e;
        }
    free(w->table);
    w->table = t;
    w->nbuckets = n;
}

static void entity_release(went *e)
{
    if (--e->refs > 0)
        return;
    watch *w = e->w;
    for (went **p = bucket(w, e->id, strlen(e->id)); *p; p = &(*p)->hnext)
        if (*p == e) {
            *p = e->hnext;
            break;
        }
    w->count--;
    free(e);
}

static void read_entity(went *e);

static void on_read(void *data, int status, redisReply *reply)
{
    (void)reply;
    went *e = data;
    e->reading = false;
    /* Unanswered, the key may not be tracked: the poll calls this entity until a read is. */
    e->tracked = status == STORE_OK;
    bool again = e->reread && e->subs && !e->w->closed;
    e->reread = false;
    if (again)
        read_entity(e); /* its own reference, taken before this read's goes */
    entity_release(e);
}

/* Reads the events key tracked (watch.c's header comment says why it goes before the calls). */
static void read_entity(went *e)
{
    watch *w = e->w;
    if (w->closed || !w->a->store)
        return;
    if (e->reading) {
        e->reread = true;
        return;
    }
    e->reading = true;
    e->refs++;
    const char *argv[] = {"XLEN", e->key};
    size_t lens[] = {4, e->key_len};
    store_read(w->a->store, 0, on_read, e, 2, argv, lens);
}

static void on_idle(uv_idle_t *h);

static void mark(went *e)
{
    watch *w = e->w;
    if (e->marked || w->closed)
        return;
    e->marked = true;
    e->refs++;
    e->dnext = w->marked;
    w->marked = e;
    uv_idle_start(&w->idle, on_idle);
}

static void mark_all(watch *w, bool untracked_only)
{
    for (size_t i = 0; i < w->nbuckets; i++)
        for (went *e = w->table[i]; e; e = e->hnext)
            if (!untracked_only || !e->tracked)
                mark(e);
}

/* e is on the list to call, whose reference keeps it while its subscribers come and go. */
static void call_subscribers(went *e)
{
    for (watch_sub *s = e->subs; s; s = e->cursor) {
        e->cursor = s->next;
        s->cb(s->data, e->id);
    }
    e->cursor = NULL;
}

static void on_idle(uv_idle_t *h)
{
    watch *w = h->data;
    uv_idle_stop(h);
    went *list = w->marked;
    w->marked = NULL;
    bool cache_on = readcache_enabled(w->a->reads);
    /* Reads first, all of them, then the calls (one pipelined write for the reads). */
    for (went *e = list; e; e = e->dnext)
        if (cache_on && e->subs)
            read_entity(e);
    while (list) {
        went *e = list;
        list = e->dnext;
        e->marked = false;
        if (e->subs && !w->closed)
            call_subscribers(e);
        entity_release(e);
    }
}

/* "ent:{<id>}:events" → the entity, when it is watched. */
static void on_change(void *ctx, const char *key, size_t len)
{
    watch *w = ctx;
    if (!key) {
        /* A flush, or the cache turned on or off: every key may have changed unheard, and
         * what Redis tracked for us may be gone. */
        mark_all(w, false);
        return;
    }
    static const char pre[] = "ent:{", suf[] = "}:events";
    size_t p = sizeof pre - 1, s = sizeof suf - 1;
    if (len <= p + s || memcmp(key, pre, p) || memcmp(key + len - s, suf, s))
        return;
    went *e = find(w, key + p, len - p - s);
    if (e)
        mark(e);
}

static void on_poll(uv_timer_t *t)
{
    watch *w = t->data;
    bool on = readcache_enabled(w->a->reads);
    /* Off, nothing is heard: every entity is called. On, only those whose last read failed
     * (their key may be untracked), and all once when the cache came back (its turning on
     * marked them already through on_change). */
    mark_all(w, on);
}

watch *watch_new(struct app *a)
{
    watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->nbuckets = 64;
    w->table = calloc(w->nbuckets, sizeof *w->table);
    if (!w->table) {
        free(w);
        return NULL;
    }
    w->a = a;
    uv_idle_init(a->loop, &w->idle);
    w->idle.data = w;
    uv_timer_init(a->loop, &w->poll);
    w->poll.data = w;
    uv_timer_start(&w->poll, on_poll, WATCH_POLL_MS, WATCH_POLL_MS);
    /* The poll is the service's own upkeep: it must not keep a draining loop alive. */
    uv_unref((uv_handle_t *)&w->poll);
    if (a->reads)
        readcache_set_listener(a->reads, on_change, w);
    return w;
}

void watch_close(watch *w)
{
    if (!w || w->closed)
        return;
    w->closed = true;
    if (w->a->reads)
        readcache_set_listener(w->a->reads, NULL, NULL);
    uv_idle_stop(&w->idle);
    uv_close((uv_handle_t *)&w->idle, NULL);
    uv_timer_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, NULL);
    while (w->marked) {
        went *e = w->marked;
        w->marked = e->dnext;
        e->marked = false;
        entity_release(e);
    }
}

void watch_free(watch *w)
{
    if (!w)
        return;
    /* Whatever is left (subscribers never removed, reads the closed store never answered). */
    for (size_t i = 0; i < w->nbuckets; i++)
        for (went *e = w->table[i], *next; e; e = next) {
            next = e->hnext;
            for (watch_sub *s = e->subs, *sn; s; s = sn) {
                sn = s->next;
                free(s);
            }
            free(e);
        }
    free(w->table);
    free(w);
}

watch_sub *watch_subscribe(watch *w, const char *entity_id, watch_cb cb, void *data)
{
    size_t len = strlen(entity_id);
    if (len >= ENTITY_ID_MAX)
        return NULL;
    watch_sub *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    went *e = find(w, entity_id, len);
    bool fresh = !e;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            free(s);
            return NULL;
        }
        e->w = w;
        memcpy(e->id, entity_id, len + 1);
        e->key_len = keys_events(e->key, entity_id);
        went **b = bucket(w, e->id, len);
        e->hnext = *b;
        *b = e;
        w->count++;
        grow(w);
    }
    s->e = e;
    s->cb = cb;
    s->data = data;
    s->next = e->subs;
    if (e->subs)
        e->subs->prev = s;
    e->subs = s;
    e->refs++;
    if (fresh)
        read_entity(e); /* never calls back here: store_read's callback touches only e */
    return s;
}

void watch_unsubscribe(watch_sub *s)
{
    if (!s)
        return;
    went *e = s->e;
    if (e->cursor == s)
        e->cursor = s->next;
    if (s->prev)
        s->prev->next = s->next;
    else
        e->subs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    free(s);
    entity_release(e);
}
