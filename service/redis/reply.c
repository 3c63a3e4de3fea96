/* redis_reply: hiredis reply objects built in blocks, one chain per top-level reply.
 *
 * hiredis's default reader makes one allocation per object and another for each string's bytes:
 * a page of 100 members cost some 200 malloc/free pairs, more than the rest of the request.
 * Here every object of one reply, its strings and its element arrays are carved from a chain of
 * blocks that the top-level reply owns; freeObject, which hiredis calls only on top-level
 * replies (after the callback, or when the reader fails mid-reply), frees the chain at once.
 * Blocks of the standard size are kept for the next reply. */
#include "redis/reply.h"

#include <hiredis/hiredis.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_DATA (32 * 1024) /* fits a page of 100 members; larger replies chain more */
#define CACHE_MAX  8

typedef struct block {
    struct block *next; /* the reply's further blocks */
    struct block *tail; /* first block only: where the next object goes */
    size_t used, cap;   /* bytes of data */
    alignas(max_align_t) unsigned char data[];
} block;

static block *cache;
static int cached;

static block *block_new(size_t need)
{
    block *b;
    if (need <= BLOCK_DATA && cache) {
        b = cache;
        cache = b->next;
        cached--;
    } else {
        size_t cap = need <= BLOCK_DATA ? BLOCK_DATA : need;
        if (!(b = malloc(offsetof(block, data) + cap)))
            return NULL;
        b->cap = cap;
    }
    b->next = NULL;
    b->tail = b;
    b->used = 0;
    return b;
}

static size_t round_up(size_t n)
{
    return (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
}

static void *block_take(block *b, size_t n)
{
    void *p = b->data + b->used;
    b->used += round_up(n);
    return p;
}

/* The top-level reply of the one the task is building; NULL when the task is the top level. */
static redisReply *root_of(const redisReadTask *task)
{
    const redisReadTask *t = task;
    while (t->parent)
        t = t->parent;
    return t == task ? NULL : t->obj;
}

static block *head_of(redisReply *root)
{
    return (block *)((unsigned char *)root - offsetof(block, data));
}

/* n bytes in the root's chain. */
static void *chain_alloc(redisReply *root, size_t n)
{
    block *head = head_of(root);
    block *tail = head->tail;
    if (tail->cap - tail->used < round_up(n)) {
        block *b = block_new(round_up(n));
        if (!b)
            return NULL;
        tail->next = b;
        head->tail = b;
        tail = b;
    }
    return block_take(tail, n);
}

static void free_object(void *reply);

/* A zeroed reply object: the first object of a new chain for a top-level task, else carved
 * from the root's. Not yet linked into its parent; *root is set to the chain's root. */
static redisReply *reply_new(const redisReadTask *task, int type, redisReply **root)
{
    redisReply *r;
    *root = root_of(task);
    if (*root) {
        r = chain_alloc(*root, sizeof *r);
    } else {
        block *b = block_new(sizeof *r);
        r = b ? block_take(b, sizeof *r) : NULL;
        *root = r;
    }
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->type = type;
    return r;
}

/* Links r into its parent array, as hiredis's own functions do. */
static void *reply_done(const redisReadTask *task, redisReply *r)
{
    if (task->parent) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

/* A failed creation: hiredis frees the root it knows of; a root of our own making is ours. */
static void *reply_failed(const redisReadTask *task, redisReply *r)
{
    if (!task->parent && r)
        free_object(r);
    return NULL;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
    redisReply *root;
    redisReply *r = reply_new(task, task->type, &root);
    if (!r)
        return NULL;
    char *copy = chain_alloc(root, len + 1);
    if (!copy)
        return reply_failed(task, r);
    memcpy(copy, str, len);
    copy[len] = '\0';
    r->str = copy;
    r->len = len;
    return reply_done(task, r);
}

static void *create_array(const redisReadTask *task, int elements)
{
    redisReply *root;
    redisReply *r = reply_new(task, REDIS_REPLY_ARRAY, &root);
    if (!r)
        return NULL;
    if (elements > 0) {
        size_t n = (size_t)elements * sizeof *r->element;
        if (!(r->element = chain_alloc(root, n)))
            return reply_failed(task, r);
        memset(r->element, 0, n);
    }
    r->elements = (size_t)elements;
    return reply_done(task, r);
}

static void *create_integer(const redisReadTask *task, long long value)
{
    redisReply *root;
    redisReply *r = reply_new(task, REDIS_REPLY_INTEGER, &root);
    if (!r)
        return NULL;
    r->integer = value;
    return reply_done(task, r);
}

static void *create_nil(const redisReadTask *task)
{
    redisReply *root;
    redisReply *r = reply_new(task, REDIS_REPLY_NIL, &root);
    return r ? reply_done(task, r) : NULL;
}

static void free_object(void *reply)
{
    block *b = reply ? head_of(reply) : NULL;
    while (b) {
        block *next = b->next;
        if (b->cap == BLOCK_DATA && cached < CACHE_MAX) {
            b->next = cache;
            cache = b;
            cached++;
        } else {
            free(b);
        }
        b = next;
    }
}

redisReplyObjectFunctions redis_reply_functions = {
    .createString = create_string,
    .createArray = create_array,
    .createInteger = create_integer,
    .createNil = create_nil,
    .freeObject = free_object,
};

void redis_reply_release_cache(void)
{
    while (cache) {
        block *next = cache->next;
        free(cache);
        cache = next;
    }
    cached = 0;
}
