/* redis_reply: replies that a real hiredis reader builds with the block-chain functions, from
 * single values to nested, multi-block, byte-by-byte and pipelined input, and the reader's error
 * paths (the ASan build checks that no chain leaks or is used after it is freed). */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include "core/buf.h"
#include "redis/reply.h"

/* The data size of one block in redis_reply.c: strings around it cross block boundaries. */
#define BLOCK (32 * 1024)
/* The deepest nesting of arrays hiredis 0.14 accepts (its error speaks of depth > 7). */
#define MAX_ARRAYS 8

typedef struct fixture {
    redisReader *reader;
    buf in; /* protocol text a test builds */
} fixture;

static int setup(void **state)
{
    static fixture f;

    f.reader = redisReaderCreateWithFunctions(&redis_reply_functions);
    if (!f.reader)
        return -1;
    f.in = (buf)BUF_INIT;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    if (f->reader)
        redisReaderFree(f->reader); /* frees a reply left half-built */
    f->reader = NULL;
    buf_free(&f->in);
    redis_reply_release_cache();
    return 0;
}

static void release(redisReply *r)
{
    redis_reply_functions.freeObject(r);
}

static void feed(fixture *f, const void *data, size_t len)
{
    assert_int_equal(redisReaderFeed(f->reader, data, len), REDIS_OK);
}

static void feed_in(fixture *f)
{
    feed(f, f->in.data, f->in.len);
}

/* The next reply, which must be complete. */
static redisReply *next_reply(fixture *f)
{
    void *reply = NULL;

    assert_int_equal(redisReaderGetReply(f->reader, &reply), REDIS_OK);
    assert_non_null(reply);
    return reply;
}

static void assert_no_reply(fixture *f)
{
    void *reply = f;

    assert_int_equal(redisReaderGetReply(f->reader, &reply), REDIS_OK);
    assert_null(reply);
}

/* Feeds one piece of protocol text holding exactly one reply and returns that reply. */
static redisReply *parse(fixture *f, const char *text, size_t len)
{
    feed(f, text, len);
    redisReply *r = next_reply(f);
    assert_no_reply(f);
    return r;
}

#define PARSE(f, lit) parse((f), (lit), sizeof(lit) - 1)

/* Byte i of string number `seed`: the first four bytes spell the seed, so no two strings are
 * alike, and the rest runs through every byte value, NUL, CR and LF included. */
static unsigned char pattern_byte(uint32_t seed, size_t i)
{
    if (i < 4)
        return (unsigned char)(seed >> (8 * (3 - i)));
    return (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

static void append_bulk(buf *in, uint32_t seed, size_t len)
{
    assert_int_equal(buf_printf(in, "$%zu\r\n", len), 0);
    assert_int_equal(buf_reserve(in, len + 2), 0);
    for (size_t i = 0; i < len; i++)
        in->data[in->len + i] = (char)pattern_byte(seed, i);
    in->len += len;
    assert_int_equal(buf_append(in, "\r\n", 2), 0);
}

static void append_str(buf *in, const char *s)
{
    assert_int_equal(buf_append_str(in, s), 0);
}

static void assert_aligned(const void *p, size_t align)
{
    if ((uintptr_t)p % align != 0)
        fail_msg("%p is not aligned to %zu", p, align);
}

/* Fields that do not belong to r's type must be as a fresh reply has them. */
static void assert_reply(const redisReply *r, int type)
{
    assert_non_null(r);
    assert_aligned(r, _Alignof(redisReply));
    assert_int_equal(r->type, type);
    if (type != REDIS_REPLY_INTEGER)
        assert_int_equal(r->integer, 0);
    if (type != REDIS_REPLY_STRING && type != REDIS_REPLY_STATUS && type != REDIS_REPLY_ERROR) {
        assert_null(r->str);
        assert_int_equal(r->len, 0);
    }
    if (type != REDIS_REPLY_ARRAY) {
        assert_null(r->element);
        assert_int_equal(r->elements, 0);
    }
}

static void assert_bytes(const redisReply *r, int type, const char *want, size_t len)
{
    assert_reply(r, type);
    assert_int_equal(r->len, len);
    assert_non_null(r->str);
    assert_memory_equal(r->str, want, len);
    assert_int_equal(r->str[len], '\0');
}

static void assert_text(const redisReply *r, int type, const char *want)
{
    assert_bytes(r, type, want, strlen(want));
}

static void assert_integer(const redisReply *r, long long want)
{
    assert_reply(r, REDIS_REPLY_INTEGER);
    assert_true(r->integer == want);
}

static void assert_nil(const redisReply *r)
{
    assert_reply(r, REDIS_REPLY_NIL);
}

static void assert_array(const redisReply *r, size_t n)
{
    assert_reply(r, REDIS_REPLY_ARRAY);
    assert_null(r->str);
    assert_int_equal(r->len, 0);
    assert_int_equal(r->elements, n);
    if (n) {
        assert_non_null(r->element);
        assert_aligned(r->element, _Alignof(redisReply *));
    } else {
        assert_null(r->element);
    }
}

static void assert_bulk(const redisReply *r, uint32_t seed, size_t len)
{
    assert_reply(r, REDIS_REPLY_STRING);
    assert_int_equal(r->len, len);
    assert_non_null(r->str);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)r->str[i] != pattern_byte(seed, i))
            fail_msg("string %u: byte %zu of %zu is 0x%02x, not 0x%02x", (unsigned)seed, i, len,
                     (unsigned char)r->str[i], pattern_byte(seed, i));
    assert_int_equal(r->str[len], '\0');
}

/* Every object, string (with its NUL) and element vector of a reply, as address ranges. */
typedef struct span {
    uintptr_t lo, hi;
} span;

typedef struct spans {
    span *v;
    size_t n, cap;
} spans;

static void spans_add(spans *s, const void *p, size_t len)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        assert_non_null(s->v);
    }
    s->v[s->n++] = (span){(uintptr_t)p, (uintptr_t)p + len};
}

static void spans_collect(spans *s, const redisReply *r)
{
    spans_add(s, r, sizeof *r);
    if (r->str)
        spans_add(s, r->str, r->len + 1);
    if (r->elements) {
        spans_add(s, r->element, r->elements * sizeof *r->element);
        for (size_t i = 0; i < r->elements; i++)
            spans_collect(s, r->element[i]);
    }
}

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* No two pieces of the reply share a byte: each was carved from the chain on its own. */
static void assert_disjoint(const redisReply *r)
{
    spans s = {0};

    spans_collect(&s, r);
    qsort(s.v, s.n, sizeof *s.v, span_cmp);
    for (size_t i = 1; i < s.n; i++)
        if (s.v[i - 1].hi > s.v[i].lo)
            fail_msg("pieces %zu and %zu of %zu overlap", i - 1, i, s.n);
    free(s.v);
}

/* Two replies alike in everything but their addresses. */
static void assert_same_reply(const redisReply *a, const redisReply *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_int_equal(a->type, b->type);
    assert_true(a->integer == b->integer);
    assert_int_equal(a->len, b->len);
    if (a->str) {
        assert_non_null(b->str);
        assert_ptr_not_equal(a->str, b->str);
        assert_memory_equal(a->str, b->str, a->len + 1);
    } else {
        assert_null(b->str);
    }
    assert_int_equal(a->elements, b->elements);
    for (size_t i = 0; i < a->elements; i++)
        assert_same_reply(a->element[i], b->element[i]);
}

/* --- Single values at the top level --------------------------------------------------------- */

static void test_status(void **state)
{
    fixture *f = *state;

    redisReply *r = PARSE(f, "+OK\r\n");
    assert_text(r, REDIS_REPLY_STATUS, "OK");
    release(r);
}

static void test_error(void **state)
{
    fixture *f = *state;

    redisReply *r = PARSE(f, "-ERR x\r\n");
    assert_text(r, REDIS_REPLY_ERROR, "ERR x");
    release(r);
}

static void test_integer(void **state)
{
    fixture *f = *state;

    redisReply *r = PARSE(f, ":-42\r\n");
    assert_integer(r, -42);
    release(r);
    r = PARSE(f, ":0\r\n");
    assert_integer(r, 0);
    release(r);
    r = PARSE(f, ":9223372036854775807\r\n");
    assert_integer(r, INT64_MAX);
    release(r);
}

static void test_nil_bulk(void **state)
{
    fixture *f = *state;

    redisReply *r = PARSE(f, "$-1\r\n");
    assert_nil(r);
    release(r);
}

static void test_bulk_with_nul_bytes(void **state)
{
    fixture *f = *state;

    redisReply *r = PARSE(f, "$8\r\na\0b\r\n\0c\0\r\n");
    assert_bytes(r, REDIS_REPLY_STRING, "a\0b\r\n\0c\0", 8);
    release(r);
}

static void test_empty_bulk(void **state)
{
    fixture *f = *state;

    redisReply *r = PARSE(f, "$0\r\n\r\n");
    assert_bytes(r, REDIS_REPLY_STRING, "", 0);
    release(r);
}

static void test_empty_array(void **state)
{
    fixture *f = *state;

    redisReply *r = PARSE(f, "*0\r\n");
    assert_array(r, 0);
    release(r);
}

static void test_nil_array(void **state)
{
    fixture *f = *state;

    /* hiredis makes a nil array a plain nil. */
    redisReply *r = PARSE(f, "*-1\r\n");
    assert_nil(r);
    release(r);
}

/* The same values as elements of an array, where they are carved from the root's chain. */
static const char mixed[] = "*9\r\n+OK\r\n-ERR x\r\n:-42\r\n$-1\r\n$3\r\n\0\r\n\r\n$0\r\n\r\n"
                            "*0\r\n*-1\r\n*1\r\n:7\r\n";

static void assert_mixed(const redisReply *r)
{
    assert_array(r, 9);
    assert_text(r->element[0], REDIS_REPLY_STATUS, "OK");
    assert_text(r->element[1], REDIS_REPLY_ERROR, "ERR x");
    assert_integer(r->element[2], -42);
    assert_nil(r->element[3]);
    assert_bytes(r->element[4], REDIS_REPLY_STRING, "\0\r\n", 3);
    assert_bytes(r->element[5], REDIS_REPLY_STRING, "", 0);
    assert_array(r->element[6], 0);
    assert_nil(r->element[7]);
    assert_array(r->element[8], 1);
    assert_integer(r->element[8]->element[0], 7);
    assert_disjoint(r);
}

static void test_simple_types_in_array(void **state)
{
    fixture *f = *state;

    redisReply *r = parse(f, mixed, sizeof mixed - 1);
    assert_mixed(r);
    release(r);
}

/* --- A MULTI/EXEC reply --------------------------------------------------------------------- */

enum { HEAD_N = 4, PAGE_N = 100 };
static const size_t head_len[HEAD_N] = {3, 0, 60, 1};

static size_t page_len(size_t i)
{
    return 170 + i % 21;
}

/* *2 of [*4 of bulks, *100 of bulks of ~180 bytes], as EXEC answers a page of members. */
static void append_multi_exec(buf *in)
{
    append_str(in, "*2\r\n*4\r\n");
    for (size_t i = 0; i < HEAD_N; i++)
        append_bulk(in, (uint32_t)(10 + i), head_len[i]);
    append_str(in, "*100\r\n");
    for (size_t i = 0; i < PAGE_N; i++)
        append_bulk(in, (uint32_t)(1000 + i), page_len(i));
}

static void assert_multi_exec(const redisReply *r)
{
    assert_array(r, 2);
    const redisReply *head = r->element[0], *page = r->element[1];
    assert_ptr_not_equal(head, page);
    assert_ptr_not_equal(head, r);
    assert_ptr_not_equal(page, r);
    assert_array(head, HEAD_N);
    assert_array(page, PAGE_N);
    assert_ptr_not_equal(head->element, page->element);
    assert_ptr_not_equal(head->element, r->element);
    for (size_t i = 0; i < HEAD_N; i++)
        assert_bulk(head->element[i], (uint32_t)(10 + i), head_len[i]);
    for (size_t i = 0; i < PAGE_N; i++)
        assert_bulk(page->element[i], (uint32_t)(1000 + i), page_len(i));
    assert_disjoint(r);
}

static void test_multi_exec_reply(void **state)
{
    fixture *f = *state;

    append_multi_exec(&f->in);
    redisReply *r = parse(f, f->in.data, f->in.len);
    assert_multi_exec(r);
    release(r);
}

/* --- Replies over several blocks ------------------------------------------------------------ */

static void test_many_blocks_array(void **state)
{
    fixture *f = *state;
    enum { N = 1000, LEN = 200 };

    /* Some 250 KB: eight blocks or so, each element's string wherever the chain has room. */
    append_str(&f->in, "*1000\r\n");
    for (uint32_t i = 0; i < N; i++)
        append_bulk(&f->in, i, LEN);
    redisReply *r = parse(f, f->in.data, f->in.len);
    assert_array(r, N);
    for (uint32_t i = 0; i < N; i++)
        assert_bulk(r->element[i], i, LEN);
    assert_disjoint(r);
    release(r);
}

static void test_big_bulk_in_array(void **state)
{
    fixture *f = *state;
    enum { BIG = 100 * 1000 };

    /* The big string gets a block of its own; what follows must still find room. */
    append_str(&f->in, "*5\r\n");
    append_bulk(&f->in, 1, 10);
    append_bulk(&f->in, 2, BIG);
    append_bulk(&f->in, 3, 10);
    append_str(&f->in, ":5\r\n*2\r\n");
    append_bulk(&f->in, 4, BIG);
    append_bulk(&f->in, 5, 300);
    redisReply *r = parse(f, f->in.data, f->in.len);
    assert_array(r, 5);
    assert_bulk(r->element[0], 1, 10);
    assert_bulk(r->element[1], 2, BIG);
    assert_bulk(r->element[2], 3, 10);
    assert_integer(r->element[3], 5);
    assert_array(r->element[4], 2);
    assert_bulk(r->element[4]->element[0], 4, BIG);
    assert_bulk(r->element[4]->element[1], 5, 300);
    assert_disjoint(r);
    release(r);
}

static void test_big_bulk_top_level(void **state)
{
    fixture *f = *state;
    enum { BIG = 100 * 1000 };

    append_bulk(&f->in, 7, BIG);
    redisReply *r = parse(f, f->in.data, f->in.len);
    assert_bulk(r, 7, BIG);
    assert_disjoint(r);
    release(r);
}

static void test_bulk_sizes_around_block(void **state)
{
    fixture *f = *state;
    static const size_t lens[] = {BLOCK - 100, BLOCK - 64, BLOCK - 49, BLOCK - 48, BLOCK - 17,
                                  BLOCK - 16,  BLOCK - 1,  BLOCK,      BLOCK + 1,  2 * BLOCK};

    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t len = lens[k];
        /* Alone, then twice in an array with a small string after them. */
        buf_reset(&f->in, 0);
        append_bulk(&f->in, (uint32_t)k, len);
        redisReply *r = parse(f, f->in.data, f->in.len);
        assert_bulk(r, (uint32_t)k, len);
        release(r);

        buf_reset(&f->in, 0);
        append_str(&f->in, "*3\r\n");
        append_bulk(&f->in, (uint32_t)k, len);
        append_bulk(&f->in, (uint32_t)k + 100, len);
        append_bulk(&f->in, (uint32_t)k + 200, 5);
        r = parse(f, f->in.data, f->in.len);
        assert_array(r, 3);
        assert_bulk(r->element[0], (uint32_t)k, len);
        assert_bulk(r->element[1], (uint32_t)k + 100, len);
        assert_bulk(r->element[2], (uint32_t)k + 200, 5);
        assert_disjoint(r);
        release(r);
    }
}

/* --- Input in pieces ------------------------------------------------------------------------ */

/* Feeds the input `step` bytes at a time, asking for a reply after each piece: none may come
 * before the last byte. */
static redisReply *parse_in_steps(fixture *f, const char *text, size_t len, size_t step)
{
    redisReply *r = NULL;

    for (size_t i = 0; i < len; i += step) {
        size_t n = len - i < step ? len - i : step;
        void *reply = NULL;
        feed(f, text + i, n);
        assert_int_equal(redisReaderGetReply(f->reader, &reply), REDIS_OK);
        if (i + n < len && reply)
            fail_msg("a reply after %zu of %zu bytes", i + n, len);
        r = reply;
    }
    assert_non_null(r);
    assert_no_reply(f);
    return r;
}

static void test_fed_byte_by_byte(void **state)
{
    fixture *f = *state;

    append_multi_exec(&f->in);
    redisReply *whole = parse(f, f->in.data, f->in.len);
    redisReply *bytes = parse_in_steps(f, f->in.data, f->in.len, 1);
    assert_multi_exec(bytes);
    assert_same_reply(whole, bytes);
    release(whole);
    release(bytes);

    whole = parse(f, mixed, sizeof mixed - 1);
    bytes = parse_in_steps(f, mixed, sizeof mixed - 1, 1);
    assert_mixed(bytes);
    assert_same_reply(whole, bytes);
    release(bytes);
    release(whole);
}

static void test_many_blocks_fed_in_pieces(void **state)
{
    fixture *f = *state;

    /* Pieces that end anywhere within lengths, strings and CR LFs. */
    append_str(&f->in, "*3\r\n*400\r\n");
    for (uint32_t i = 0; i < 400; i++)
        append_bulk(&f->in, i, 150 + i % 90);
    append_bulk(&f->in, 500, 3 * BLOCK);
    append_str(&f->in, ":1\r\n");
    redisReply *whole = parse(f, f->in.data, f->in.len);
    redisReply *pieces = parse_in_steps(f, f->in.data, f->in.len, 7);
    assert_array(pieces, 3);
    assert_array(pieces->element[0], 400);
    for (uint32_t i = 0; i < 400; i++)
        assert_bulk(pieces->element[0]->element[i], i, 150 + i % 90);
    assert_bulk(pieces->element[1], 500, 3 * BLOCK);
    assert_integer(pieces->element[2], 1);
    assert_disjoint(pieces);
    assert_same_reply(whole, pieces);
    release(whole);
    release(pieces);
}

/* --- Pipelined replies and block reuse ------------------------------------------------------ */

static const char pipeline[] = "+OK\r\n:1\r\n*2\r\n$1\r\na\r\n:2\r\n$-1\r\n-ERR no\r\n$3\r\nxyz\r\n"
                               "*0\r\n";

static void test_pipelined_freed_in_turn(void **state)
{
    fixture *f = *state;

    feed(f, pipeline, sizeof pipeline - 1);
    redisReply *r = next_reply(f);
    assert_text(r, REDIS_REPLY_STATUS, "OK");
    release(r);
    r = next_reply(f);
    assert_integer(r, 1);
    release(r);
    r = next_reply(f);
    assert_array(r, 2);
    assert_text(r->element[0], REDIS_REPLY_STRING, "a");
    assert_integer(r->element[1], 2);
    release(r);
    r = next_reply(f);
    assert_nil(r);
    release(r);
    r = next_reply(f);
    assert_text(r, REDIS_REPLY_ERROR, "ERR no");
    release(r);
    r = next_reply(f);
    assert_text(r, REDIS_REPLY_STRING, "xyz");
    release(r);
    r = next_reply(f);
    assert_array(r, 0);
    release(r);
    assert_no_reply(f);
}

static void test_pipelined_held_together(void **state)
{
    fixture *f = *state;
    redisReply *r[7];

    /* All alive at once, each in its own chain, then freed from the last. */
    feed(f, pipeline, sizeof pipeline - 1);
    for (int i = 0; i < 7; i++)
        r[i] = next_reply(f);
    assert_no_reply(f);
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(r[i], r[j]);
    assert_text(r[0], REDIS_REPLY_STATUS, "OK");
    assert_integer(r[1], 1);
    assert_array(r[2], 2);
    assert_text(r[2]->element[0], REDIS_REPLY_STRING, "a");
    assert_integer(r[2]->element[1], 2);
    assert_nil(r[3]);
    assert_text(r[4], REDIS_REPLY_ERROR, "ERR no");
    assert_text(r[5], REDIS_REPLY_STRING, "xyz");
    assert_array(r[6], 0);
    for (int i = 6; i >= 0; i--)
        release(r[i]);
}

static void test_freed_block_is_reused(void **state)
{
    fixture *f = *state;

    redisReply *first = PARSE(f, "*1\r\n$3\r\nabc\r\n");
    release(first);
    /* The freed block is taken again, and whatever the last reply left there is overwritten. */
    redisReply *second = PARSE(f, ":3\r\n");
    assert_ptr_equal(second, first);
    assert_integer(second, 3);
    release(second);
    redisReply *third = PARSE(f, "+x\r\n");
    assert_ptr_equal(third, first);
    assert_text(third, REDIS_REPLY_STATUS, "x");
    release(third);
}

/* Reply number n of a long run; its shape and size depend on n, and one in fifty spans several
 * blocks. */
static void append_numbered(buf *in, uint32_t n)
{
    switch (n % 5) {
    case 0:
        assert_int_equal(buf_printf(in, "*%u\r\n", 1 + n % 13), 0);
        for (uint32_t i = 0; i < 1 + n % 13; i++)
            append_bulk(in, n * 16 + i, 50 + (n + i) % 200);
        break;
    case 1:
        append_bulk(in, n, n % 3000);
        break;
    case 2:
        assert_int_equal(buf_printf(in, ":%u\r\n", n), 0);
        break;
    case 3:
        append_str(in, "*2\r\n*3\r\n");
        for (uint32_t i = 0; i < 3; i++)
            append_bulk(in, n * 16 + i, 20 + i);
        assert_int_equal(buf_printf(in, ":-%u\r\n", n), 0);
        break;
    default:
        if (n % 50 == 4) {
            append_str(in, "*3\r\n");
            append_bulk(in, n * 16, 40000);
            append_bulk(in, n * 16 + 1, 30000);
            append_bulk(in, n * 16 + 2, 5);
        } else {
            append_str(in, n % 2 ? "*0\r\n" : "$-1\r\n");
        }
        break;
    }
}

static void assert_numbered(const redisReply *r, uint32_t n)
{
    switch (n % 5) {
    case 0:
        assert_array(r, 1 + n % 13);
        for (uint32_t i = 0; i < 1 + n % 13; i++)
            assert_bulk(r->element[i], n * 16 + i, 50 + (n + i) % 200);
        break;
    case 1:
        assert_bulk(r, n, n % 3000);
        break;
    case 2:
        assert_integer(r, n);
        break;
    case 3:
        assert_array(r, 2);
        assert_array(r->element[0], 3);
        for (uint32_t i = 0; i < 3; i++)
            assert_bulk(r->element[0]->element[i], n * 16 + i, 20 + i);
        assert_integer(r->element[1], -(long long)n);
        break;
    default:
        if (n % 50 == 4) {
            assert_array(r, 3);
            assert_bulk(r->element[0], n * 16, 40000);
            assert_bulk(r->element[1], n * 16 + 1, 30000);
            assert_bulk(r->element[2], n * 16 + 2, 5);
        } else if (n % 2) {
            assert_array(r, 0);
        } else {
            assert_nil(r);
        }
        break;
    }
}

static void test_many_replies_reuse_blocks(void **state)
{
    fixture *f = *state;
    enum { N = 1000, HELD = 11, BATCH = 7 };
    redisReply *held[HELD] = {0};
    uint32_t held_n[HELD];
    uint32_t n = 0;

    /* Batches of pipelined replies; the last HELD stay alive (more than the blocks the cache
     * keeps), and each is checked again just before it is freed: a block handed out twice
     * would show there. */
    while (n < N) {
        buf_reset(&f->in, 1 << 20);
        for (uint32_t i = 0; i < BATCH; i++)
            append_numbered(&f->in, n + i);
        feed_in(f);
        for (uint32_t i = 0; i < BATCH; i++, n++) {
            redisReply *r = next_reply(f);
            assert_numbered(r, n);
            size_t slot = n % HELD;
            if (held[slot]) {
                assert_numbered(held[slot], held_n[slot]);
                release(held[slot]);
            }
            held[slot] = r;
            held_n[slot] = n;
        }
        assert_no_reply(f);
    }
    for (size_t slot = 0; slot < HELD; slot++) {
        assert_numbered(held[slot], held_n[slot]);
        release(held[slot]);
    }
}

/* --- Reader errors -------------------------------------------------------------------------- */

static void assert_reader_failed(fixture *f, const char *errstr)
{
    void *reply = f;

    assert_int_equal(redisReaderGetReply(f->reader, &reply), REDIS_ERR);
    assert_null(reply);
    assert_int_equal(f->reader->err, REDIS_ERR_PROTOCOL);
    assert_non_null(strstr(f->reader->errstr, errstr));
    assert_null(redisReaderGetObject(f->reader));
    /* The reader stays failed. */
    reply = f;
    assert_int_equal(redisReaderGetReply(f->reader, &reply), REDIS_ERR);
    assert_null(reply);
}

/* That the block holding a freed reply's root went back to the cache: of the next replies a
 * fresh reader builds, as many as the cache keeps (8), one takes it. */
static void assert_root_cached(const void *root)
{
    enum { CACHE_MAX = 8 };
    redisReader *reader = redisReaderCreateWithFunctions(&redis_reply_functions);
    void *r[CACHE_MAX];
    bool found = false;

    assert_non_null(reader);
    for (int i = 0; i < CACHE_MAX; i++)
        assert_int_equal(redisReaderFeed(reader, ":1\r\n", 4), REDIS_OK);
    for (int i = 0; i < CACHE_MAX; i++) {
        assert_int_equal(redisReaderGetReply(reader, &r[i]), REDIS_OK);
        assert_integer(r[i], 1);
        found |= r[i] == root;
    }
    for (int i = 0; i < CACHE_MAX; i++)
        release(r[i]);
    redisReaderFree(reader);
    assert_true(found);
}

static void test_protocol_error_mid_array(void **state)
{
    fixture *f = *state;
    static const char part[] = "*3\r\n$1\r\na\r\n";

    feed(f, part, sizeof part - 1);
    assert_no_reply(f);
    /* The half-built reply, which the reader holds. */
    const redisReply *partial = redisReaderGetObject(f->reader);
    assert_array(partial, 3);
    assert_text(partial->element[0], REDIS_REPLY_STRING, "a");
    assert_null(partial->element[1]);
    assert_null(partial->element[2]);

    feed(f, "!bad\r\n", 6);
    assert_reader_failed(f, "Protocol error");
    /* hiredis freed it through freeObject, which kept its block. */
    assert_root_cached(partial);
}

static void test_protocol_error_after_big_element(void **state)
{
    fixture *f = *state;

    /* A chain of several blocks, one of them oversized, freed on the error. */
    append_str(&f->in, "*2\r\n*3\r\n");
    append_bulk(&f->in, 1, 100 * 1000);
    append_bulk(&f->in, 2, 20000);
    append_bulk(&f->in, 3, 20000);
    append_str(&f->in, "*2\r\n:1\r\n$x\r\n");
    feed_in(f);
    assert_reader_failed(f, "Bad bulk string length");
}

static void test_error_after_complete_reply(void **state)
{
    fixture *f = *state;

    append_multi_exec(&f->in);
    append_str(&f->in, "*2\r\n:1\r\n?\r\n");
    feed_in(f);
    redisReply *r = next_reply(f);
    assert_multi_exec(r);
    assert_reader_failed(f, "Protocol error");
    /* The complete reply is the caller's and outlives the failure. */
    assert_multi_exec(r);
    release(r);
}

static void test_reader_freed_mid_reply(void **state)
{
    fixture *f = *state;

    append_str(&f->in, "*3\r\n");
    append_bulk(&f->in, 1, 2 * BLOCK);
    append_bulk(&f->in, 2, 100);
    append_str(&f->in, "*2\r\n:1\r\n");
    feed_in(f);
    assert_no_reply(f);
    const redisReply *partial = redisReaderGetObject(f->reader);
    assert_array(partial, 3);
    assert_bulk(partial->element[0], 1, 2 * BLOCK);
    assert_bulk(partial->element[1], 2, 100);
    assert_array(partial->element[2], 2);
    assert_integer(partial->element[2]->element[0], 1);
    assert_null(partial->element[2]->element[1]);

    redisReaderFree(f->reader);
    f->reader = NULL;
    assert_root_cached(partial);
}

/* --- Nesting -------------------------------------------------------------------------------- */

/* `depth` arrays inside each other: level k is [k, level k+1, string k], the innermost
 * [k, string 99]. */
static void append_nested(buf *in, int depth)
{
    for (int k = 0; k < depth; k++)
        assert_int_equal(buf_printf(in, "*%d\r\n:%d\r\n", k < depth - 1 ? 3 : 2, k), 0);
    append_bulk(in, 99, 30);
    for (int k = depth - 2; k >= 0; k--)
        append_bulk(in, (uint32_t)k, 10 + (size_t)k);
}

static void assert_nested(const redisReply *r, int depth)
{
    for (int k = 0; k < depth; k++) {
        bool inner = k == depth - 1;
        assert_array(r, inner ? 2 : 3);
        assert_integer(r->element[0], k);
        if (inner) {
            assert_bulk(r->element[1], 99, 30);
        } else {
            assert_bulk(r->element[2], (uint32_t)k, 10 + (size_t)k);
            r = r->element[1];
        }
    }
}

static void test_deep_nesting(void **state)
{
    fixture *f = *state;

    for (int depth = 1; depth <= MAX_ARRAYS; depth++) {
        buf_reset(&f->in, 0);
        append_nested(&f->in, depth);
        redisReply *r = parse(f, f->in.data, f->in.len);
        assert_nested(r, depth);
        assert_disjoint(r);
        release(r);
        /* Byte by byte, each level's task waits on the reader's stack. */
        redisReply *bytes = parse_in_steps(f, f->in.data, f->in.len, 1);
        assert_nested(bytes, depth);
        release(bytes);
    }
}

static void test_nesting_too_deep_fails(void **state)
{
    fixture *f = *state;

    append_nested(&f->in, MAX_ARRAYS + 1);
    feed_in(f);
    assert_reader_failed(f, "nested multi bulk");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nil_bulk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bulk_with_nul_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_bulk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_array, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nil_array, setup, teardown),
        cmocka_unit_test_setup_teardown(test_simple_types_in_array, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_exec_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_blocks_array, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_bulk_in_array, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_bulk_top_level, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bulk_sizes_around_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fed_byte_by_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_blocks_fed_in_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_freed_in_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_held_together, setup, teardown),
        cmocka_unit_test_setup_teardown(test_freed_block_is_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_replies_reuse_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_error_mid_array, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_error_after_big_element, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_after_complete_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_freed_mid_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_nesting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nesting_too_deep_fails, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
