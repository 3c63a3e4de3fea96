/* readcache: an answer is given back only for the same read, while it is on and none of the
 * read's keys changed since the read was SENT; the copy is deep; errors and oversized answers
 * are not kept; the byte budget holds; the counters add up. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cache/readcache.h"

/* The cache under test, freed by teardown also when an assertion cut the test short. */
static readcache *g_rc;

static int teardown(void **state)
{
    (void)state;
    readcache_free(g_rc);
    g_rc = NULL;
    return 0;
}

/* Reply trees built on the stack. */
static redisReply str(const char *s)
{
    return (redisReply){.type = REDIS_REPLY_STRING, .str = (char *)s, .len = strlen(s)};
}

static redisReply arr(redisReply **elements, size_t n)
{
    return (redisReply){.type = REDIS_REPLY_ARRAY, .element = elements, .elements = n};
}

static readcache *on_cache(size_t bytes)
{
    readcache *rc = readcache_new(bytes);
    assert_non_null(rc);
    readcache_set_enabled(rc, true);
    return rc;
}

static void ticket(readcache_ticket *t, const char *key)
{
    readcache_ticket_begin(g_rc, t);
    readcache_ticket_key(g_rc, t, key, strlen(key));
}

static const redisReply *get(const char *read)
{
    return readcache_get(g_rc, read, strlen(read));
}

static void put(const readcache_ticket *t, const char *read, const redisReply *r)
{
    readcache_put(g_rc, t, read, strlen(read), r);
}

static void test_deep_copy_given_back_for_the_same_read(void **state)
{
    (void)state;
    g_rc = on_cache(1 << 20);
    char json[] = "{\"id\":1}";
    redisReply a = str(json), b = (redisReply){.type = REDIS_REPLY_NIL},
               c = (redisReply){.type = REDIS_REPLY_INTEGER, .integer = 42};
    redisReply *els[] = {&a, &b, &c};
    redisReply top = arr(els, 3);
    readcache_ticket t;
    ticket(&t, "ent:{x}");
    assert_null(get("HMGET ent:{x} json"));
    put(&t, "HMGET ent:{x} json", &top);
    json[2] = 'X'; /* the caller's reply is gone after the callback: the copy must not care */
    const redisReply *r = get("HMGET ent:{x} json");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_string_equal(r->element[0]->str, "{\"id\":1}");
    assert_int_equal(r->element[0]->len, 8);
    assert_int_equal(r->element[1]->type, REDIS_REPLY_NIL);
    assert_int_equal(r->element[2]->integer, 42);
    assert_null(get("HMGET ent:{x} jso"));
    assert_null(get("HMGET ent:{y} json"));
    const readcache_stats *s = readcache_get_stats(g_rc);
    assert_int_equal(s->hits, 1);
    assert_int_equal(s->misses, 3);
    assert_int_equal(s->fills, 1);
    assert_int_equal(s->entries, 1);
    assert_true(s->bytes > 0);
}

static void test_invalidated_key_voids_answers_and_reads_in_flight(void **state)
{
    (void)state;
    g_rc = on_cache(1 << 20);
    redisReply v = str("v1");
    readcache_ticket t1, t2, t3;
    ticket(&t1, "k1");
    put(&t1, "GET k1", &v);
    ticket(&t2, "k2");
    put(&t2, "GET k2", &v);
    readcache_invalidate(g_rc, "k1", 2);
    assert_null(get("GET k1"));     /* stale: dropped */
    assert_non_null(get("GET k2")); /* another key: kept */
    /* A read sent before an invalidation of its key, answered after it: not kept. */
    ticket(&t3, "k2");
    readcache_invalidate(g_rc, "k2", 2);
    put(&t3, "GET k2", &v);
    assert_null(get("GET k2"));
    /* A read sent after the invalidation: kept. */
    ticket(&t3, "k2");
    put(&t3, "GET k2", &v);
    assert_non_null(get("GET k2"));
    const readcache_stats *s = readcache_get_stats(g_rc);
    assert_int_equal(s->invalidations, 2);
    assert_int_equal(s->dropped, 1);
    assert_int_equal(s->stale, 2);
}

static void test_every_key_of_a_transaction_counts(void **state)
{
    (void)state;
    g_rc = on_cache(1 << 20);
    redisReply v = str("v");
    const char *keys[] = {"ent:{a}", "ent:{a}:owners", "ent:{a}:members:order"};
    for (int changed = 0; changed < 3; changed++) {
        readcache_ticket t;
        readcache_ticket_begin(g_rc, &t);
        for (int i = 0; i < 3; i++)
            readcache_ticket_key(g_rc, &t, keys[i], strlen(keys[i]));
        put(&t, "MULTI ...", &v);
        assert_non_null(get("MULTI ..."));
        readcache_invalidate(g_rc, keys[changed], strlen(keys[changed]));
        assert_null(get("MULTI ..."));
    }
    /* More keys than a ticket holds: never kept. */
    readcache_ticket t;
    readcache_ticket_begin(g_rc, &t);
    for (int i = 0; i < READCACHE_MAX_KEYS + 1; i++)
        readcache_ticket_key(g_rc, &t, "k", 1);
    put(&t, "MULTI many", &v);
    assert_null(get("MULTI many"));
}

static void test_off_or_flushed_keeps_nothing_and_voids_tickets(void **state)
{
    (void)state;
    g_rc = readcache_new(1 << 20);
    assert_non_null(g_rc);
    redisReply v = str("v");
    readcache_ticket t;
    ticket(&t, "k");
    put(&t, "GET k", &v); /* off from the start */
    assert_null(get("GET k"));
    readcache_set_enabled(g_rc, true);
    put(&t, "GET k", &v); /* ticket from before it went on */
    assert_null(get("GET k"));
    ticket(&t, "k");
    put(&t, "GET k", &v);
    assert_non_null(get("GET k"));
    readcache_set_enabled(g_rc, false);
    assert_false(readcache_enabled(g_rc));
    assert_null(get("GET k"));
    readcache_set_enabled(g_rc, true);
    assert_null(get("GET k")); /* emptied by going off */
    ticket(&t, "k");
    put(&t, "GET k", &v);
    readcache_ticket t2;
    ticket(&t2, "j");
    readcache_flush(g_rc);
    assert_null(get("GET k"));
    put(&t2, "GET j", &v); /* sent before the flush */
    assert_null(get("GET j"));
    assert_int_equal(readcache_get_stats(g_rc)->entries, 0);
    assert_int_equal(readcache_get_stats(g_rc)->bytes, 0);
    assert_false(readcache_enabled(NULL));
}

static void test_errors_and_oversized_answers_not_kept(void **state)
{
    (void)state;
    g_rc = on_cache(1 << 20);
    readcache_ticket t;
    redisReply err = {.type = REDIS_REPLY_ERROR, .str = "ERR x", .len = 5};
    ticket(&t, "k");
    put(&t, "GET k", &err);
    assert_null(get("GET k"));
    redisReply ok = str("fine");
    redisReply *els[] = {&ok, &err};
    redisReply tx = arr(els, 2); /* a transaction with one failed command */
    put(&t, "MULTI k", &tx);
    assert_null(get("MULTI k"));
    static char big[READCACHE_MAX_ENTRY];
    memset(big, 'a', sizeof big - 1);
    redisReply huge = str(big);
    put(&t, "GET huge", &huge);
    assert_null(get("GET huge"));
    assert_int_equal(readcache_get_stats(g_rc)->fills, 0);
    assert_int_equal(readcache_get_stats(g_rc)->dropped, 3);
}

static void test_byte_budget_holds(void **state)
{
    (void)state;
    size_t budget = 64 * 1024;
    g_rc = on_cache(budget);
    static char body[8000];
    memset(body, 'b', sizeof body - 1);
    redisReply v = str(body);
    char read[32];
    for (int i = 0; i < 200; i++) {
        readcache_ticket t;
        snprintf(read, sizeof read, "GET k%d", i);
        ticket(&t, read + 4);
        put(&t, read, &v);
        assert_true(readcache_get_stats(g_rc)->bytes <= budget);
    }
    /* The newest answer went in (older ones made room). */
    assert_non_null(get(read));
    assert_true(readcache_get_stats(g_rc)->entries >= 4);
}

/* A rendering is kept only beside the answer the last lookup handed out, given back while that
 * answer stands and its time has not come, dropped with the answer, and counted in the
 * budget. */
static void test_rendering_kept_beside_the_answer(void **state)
{
    (void)state;
    g_rc = on_cache(1 << 20);
    readcache_ticket t;
    redisReply one = str("one"), two = str("two");
    ticket(&t, "k1");
    put(&t, "GET k1", &one);
    ticket(&t, "k2");
    put(&t, "GET k2", &two);
    size_t len = 0;
    /* a reply the cache did not hand out (as one from Redis) keeps nothing */
    readcache_keep_rendered(g_rc, &one, INT64_MAX, "body", 4);
    assert_null(readcache_rendered(g_rc, &one, 0, &len));
    const redisReply *a = get("GET k1");
    assert_non_null(a);
    assert_null(readcache_rendered(g_rc, a, 0, &len));
    size_t before = readcache_get_stats(g_rc)->bytes;
    readcache_keep_rendered(g_rc, a, 1000, "rendered one", 12);
    assert_int_equal(readcache_get_stats(g_rc)->bytes, before + 12);
    a = get("GET k1");
    const char *body = readcache_rendered(g_rc, a, 999, &len);
    assert_non_null(body);
    assert_memory_equal(body, "rendered one", 12);
    assert_int_equal(len, 12);
    assert_null(readcache_rendered(g_rc, a, 1000, &len)); /* its time has come */
    /* once another answer was handed out, the first one's reply names nothing */
    const redisReply *b = get("GET k2");
    assert_non_null(b);
    assert_null(readcache_rendered(g_rc, a, 0, &len));
    readcache_keep_rendered(g_rc, a, INT64_MAX, "wrong", 5);
    assert_null(readcache_rendered(g_rc, b, 0, &len));
    /* a changed key drops the answer and its rendering, bytes and all */
    a = get("GET k1");
    readcache_keep_rendered(g_rc, a, INT64_MAX, "again", 5);
    before = readcache_get_stats(g_rc)->bytes;
    readcache_invalidate(g_rc, "k1", 2);
    assert_null(get("GET k1"));
    assert_true(readcache_get_stats(g_rc)->bytes < before - 5);
    ticket(&t, "k1");
    put(&t, "GET k1", &one);
    a = get("GET k1");
    assert_null(readcache_rendered(g_rc, a, 0, &len));
    assert_int_equal(readcache_get_stats(g_rc)->rendered_hits, 1);
}

/* What the listener heard: each key, "*" for everything. */
static char heard[256];

static void on_change(void *ctx, const char *key, size_t len)
{
    (void)ctx;
    size_t at = strlen(heard);
    snprintf(heard + at, sizeof heard - at, "%.*s;", key ? (int)len : 1, key ? key : "*");
}

static void test_listener_hears_every_key_and_every_flush(void **state)
{
    (void)state;
    heard[0] = '\0';
    g_rc = readcache_new(1 << 16);
    assert_non_null(g_rc);
    readcache_set_listener(g_rc, on_change, NULL);
    readcache_set_enabled(g_rc, true);
    readcache_invalidate(g_rc, "k1", 2);
    readcache_invalidate(g_rc, "k2", 2);
    readcache_flush(g_rc);
    readcache_set_enabled(g_rc, false);
    /* off, an invalidation is still heard: a watcher polls then, but loses nothing */
    readcache_invalidate(g_rc, "k3", 2);
    assert_string_equal(heard, "*;k1;k2;*;*;k3;");
    readcache_set_listener(g_rc, NULL, NULL);
    readcache_flush(g_rc);
    assert_string_equal(heard, "*;k1;k2;*;*;k3;");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_deep_copy_given_back_for_the_same_read, teardown),
        cmocka_unit_test_teardown(test_invalidated_key_voids_answers_and_reads_in_flight, teardown),
        cmocka_unit_test_teardown(test_every_key_of_a_transaction_counts, teardown),
        cmocka_unit_test_teardown(test_off_or_flushed_keeps_nothing_and_voids_tickets, teardown),
        cmocka_unit_test_teardown(test_errors_and_oversized_answers_not_kept, teardown),
        cmocka_unit_test_teardown(test_byte_budget_holds, teardown),
        cmocka_unit_test_teardown(test_rendering_kept_beside_the_answer, teardown),
        cmocka_unit_test_teardown(test_listener_hears_every_key_and_every_flush, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
