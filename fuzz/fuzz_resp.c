/* fuzz_resp: Redis replies as they come off the wire, through everything entityd does with them
 * before a handler looks: hiredis's parser with entityd's reply objects (redis_reply.c, one
 * block chain per reply), and the read cache's flat copies (readcache.c). Checked:
 *   - entityd's reply objects equal hiredis's own for the same bytes (type, integer, string
 *     bytes, element count, recursively), and both parsers agree on where the input is bad;
 *   - a reply the cache keeps comes back equal, after the original is freed; errors are never
 *     kept;
 *   - the cache's byte count stays within its budget and returns to 0 when emptied.
 * Input: byte 0 picks how many keys the cached read names; the rest is the reply bytes. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "cache/readcache.h"
#include "redis/reply.h"
#include "fuzz_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BUDGET (256 * 1024)

static readcache *rc;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    rc = readcache_new(BUDGET);
    if (!rc)
        abort();
    readcache_set_enabled(rc, true);
    return 0;
}

static bool same(const redisReply *a, const redisReply *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return a->integer == b->integer;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0 && a->str[a->len] == 0;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements)
            return false;
        for (size_t i = 0; i < a->elements; i++)
            if (!same(a->element[i], b->element[i]))
                return false;
        return true;
    default:
        return true;
    }
}

static bool holds_error(const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR)
        return true;
    if (r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements; i++)
            if (holds_error(r->element[i]))
                return true;
    return false;
}

/* hiredis 0.14 allocates an array's element vector as soon as it reads the array's header, so
 * "*99999999999" is an allocation of that size, in hiredis's own reader as in ours. Redis is a
 * trusted peer; such inputs are skipped rather than reported as out-of-memory. */
static bool huge_array(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (d[i] != '*')
            continue;
        unsigned long long v = 0;
        for (size_t j = i + 1; j < n && d[j] >= '0' && d[j] <= '9' && v <= 100000; j++)
            v = v * 10 + (d[j] - '0');
        if (v > 100000)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || huge_array(data + 1, size - 1))
        return 0;
    redisReader *ours = redisReaderCreateWithFunctions(&redis_reply_functions);
    redisReader *theirs = redisReaderCreate();
    FUZZ_CHECK(ours && theirs);
    ours->maxbuf = theirs->maxbuf = 0;
    int nkeys = data[0] % (READCACHE_MAX_KEYS + 2);
    FUZZ_CHECK(redisReaderFeed(ours, (const char *)data + 1, size - 1) == REDIS_OK);
    FUZZ_CHECK(redisReaderFeed(theirs, (const char *)data + 1, size - 1) == REDIS_OK);
    for (int n = 0; n < 64; n++) {
        void *a = NULL, *b = NULL;
        int ra = redisReaderGetReply(ours, &a);
        int rb = redisReaderGetReply(theirs, &b);
        FUZZ_CHECK(ra == rb);
        FUZZ_CHECK((a == NULL) == (b == NULL));
        if (ra != REDIS_OK || !a)
            break;
        FUZZ_CHECK(same(a, b));
        freeReplyObject(b);

        char read[32];
        snprintf(read, sizeof read, "read %d", n);
        readcache_ticket t;
        readcache_ticket_begin(rc, &t);
        for (int k = 0; k < nkeys; k++)
            readcache_ticket_key(rc, &t, read, strlen(read) - (size_t)(k % 3));
        readcache_put(rc, &t, read, strlen(read), a);
        const redisReply *kept = readcache_get(rc, read, strlen(read));
        if (kept)
            FUZZ_CHECK(same(kept, a) && !holds_error(kept));
        ours->fn->freeObject(a);
        if (kept) /* still whole once the original is gone */
            FUZZ_CHECK(readcache_get(rc, read, strlen(read)) == kept);
        FUZZ_CHECK(readcache_get_stats(rc)->bytes <= BUDGET);
    }
    redisReaderFree(ours);
    redisReaderFree(theirs);
    readcache_flush(rc);
    FUZZ_CHECK(readcache_get_stats(rc)->bytes == 0 && readcache_get_stats(rc)->entries == 0);
    return 0;
}
