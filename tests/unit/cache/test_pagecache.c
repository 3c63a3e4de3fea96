/* pagecache: a page is returned only under the version it was stored with; slots replace,
 * oversized bodies are not kept, a disabled cache keeps nothing, the counters add up. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cache/pagecache.h"

/* The cache under test, freed by teardown also when an assertion cut the test short. */
static pagecache *g_pc;

static int teardown(void **state)
{
    (void)state;
    pagecache_free(g_pc);
    g_pc = NULL;
    return 0;
}

static const char *get(const char *key, const char *version, size_t *len)
{
    return pagecache_get(g_pc, key, strlen(key), version, strlen(version), len);
}

static void put(const char *key, const char *version, const char *body)
{
    pagecache_put(g_pc, key, strlen(key), version, strlen(version), body, strlen(body));
}

static void test_hit_only_under_the_stored_version(void **state)
{
    (void)state;
    g_pc = pagecache_new(16, 1024);
    assert_non_null(g_pc);
    size_t len = 0;
    assert_false(pagecache_lookup(g_pc, "e1|c|100", 8));
    assert_null(get("e1|c|100", "v1:3", &len));
    put("e1|c|100", "v1:3", "{\"users\":[1]}");
    assert_true(pagecache_lookup(g_pc, "e1|c|100", 8));
    const char *b = get("e1|c|100", "v1:3", &len);
    assert_non_null(b);
    assert_int_equal(len, 13);
    assert_memory_equal(b, "{\"users\":[1]}", 13);
    /* Another version of the same key, a longer or a shorter one: stale. */
    assert_null(get("e1|c|100", "v1:4", &len));
    assert_null(get("e1|c|100", "v2:3", &len));
    assert_null(get("e1|c|100", "v1:30", &len));
    assert_null(get("e1|c|100", "v1:", &len));
    /* A key that is a prefix of the stored one, or longer: not the page. */
    assert_null(get("e1|c|10", "v1:3", &len));
    assert_null(get("e1|c|1000", "v1:3", &len));
    /* A newer version replaces the page. */
    put("e1|c|100", "v2:4", "{\"users\":[1,2]}");
    assert_null(get("e1|c|100", "v1:3", &len));
    b = get("e1|c|100", "v2:4", &len);
    assert_non_null(b);
    assert_memory_equal(b, "{\"users\":[1,2]}", len);
    pagecache_stats st = pagecache_get_stats(g_pc);
    /* misses: the lookup and get before the put, the two other keys; stale: five. */
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 4);
    assert_int_equal(st.stale, 5);
    assert_int_equal(st.stored, 2);
}

static void test_many_keys_stay_within_the_slots(void **state)
{
    (void)state;
    g_pc = pagecache_new(8, 1024);
    char key[32], body[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "e%d|c|100", i);
        snprintf(body, sizeof body, "page %d", i);
        put(key, "v", body);
    }
    /* Whatever survived is the right page for its key; at most one per slot survived. */
    int found = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "e%d|c|100", i);
        snprintf(body, sizeof body, "page %d", i);
        size_t len;
        const char *b = get(key, "v", &len);
        if (b) {
            found++;
            assert_int_equal(len, strlen(body));
            assert_memory_equal(b, body, len);
        }
    }
    assert_in_range(found, 1, 8);
    /* The last key put is always there. */
    size_t len;
    assert_non_null(get("e999|c|100", "v", &len));
}

static void test_oversized_body_is_not_kept(void **state)
{
    (void)state;
    g_pc = pagecache_new(4, 8);
    size_t len;
    put("k", "v", "12345678");
    assert_non_null(get("k", "v", &len));
    put("k", "w", "123456789");
    /* The old page stays; the oversized one was not stored. */
    assert_null(get("k", "w", &len));
    assert_non_null(get("k", "v", &len));
    assert_int_equal(pagecache_get_stats(g_pc).stored, 1);
}

static void test_disabled_cache_keeps_nothing(void **state)
{
    (void)state;
    g_pc = pagecache_new(0, 1024);
    assert_null(g_pc);
    size_t len;
    put("k", "v", "body");
    assert_false(pagecache_lookup(g_pc, "k", 1));
    assert_null(get("k", "v", &len));
    pagecache_stats st = pagecache_get_stats(g_pc);
    assert_int_equal(st.hits + st.misses + st.stale + st.stored, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_hit_only_under_the_stored_version, teardown),
        cmocka_unit_test_teardown(test_many_keys_stay_within_the_slots, teardown),
        cmocka_unit_test_teardown(test_oversized_body_is_not_kept, teardown),
        cmocka_unit_test_teardown(test_disabled_cache_keeps_nothing, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
