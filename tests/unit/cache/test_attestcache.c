/* The cache of signed attestations: whole-key matches, bounded size, 0 disables it. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cache/attestcache.h"

static void key_of(char *k, size_t cap, int i)
{
    snprintf(k, cap, "domain|entity|name|level-%d|name|1700000000|0xabc", i);
}

static void test_put_get(void **state)
{
    (void)state;
    attestcache *c = attestcache_new(64);
    assert_non_null(c);
    size_t len = 0;
    assert_null(attestcache_get(c, "k1", 2, &len));
    attestcache_put(c, "k1", 2, "{\"a\":1}", 7);
    const char *v = attestcache_get(c, "k1", 2, &len);
    assert_non_null(v);
    assert_int_equal(len, 7);
    assert_memory_equal(v, "{\"a\":1}", 7);
    /* a key that is a prefix, or differs in one byte, is another key */
    assert_null(attestcache_get(c, "k", 1, &len));
    assert_null(attestcache_get(c, "k2", 2, &len));
    /* a put again replaces */
    attestcache_put(c, "k1", 2, "{}", 2);
    v = attestcache_get(c, "k1", 2, &len);
    assert_int_equal(len, 2);
    assert_memory_equal(v, "{}", 2);
    assert_int_equal(attestcache_hits(c), 2);
    assert_int_equal(attestcache_misses(c), 3);
    attestcache_free(c);
}

static void test_bounded(void **state)
{
    (void)state;
    attestcache *c = attestcache_new(16);
    char k[96];
    for (int i = 0; i < 1000; i++) {
        key_of(k, sizeof k, i);
        attestcache_put(c, k, strlen(k), k, strlen(k));
    }
    int kept = 0;
    for (int i = 0; i < 1000; i++) {
        size_t len;
        key_of(k, sizeof k, i);
        const char *v = attestcache_get(c, k, strlen(k), &len);
        if (v) {
            kept++;
            assert_int_equal(len, strlen(k));
            assert_memory_equal(v, k, len); /* never another key's value */
        }
    }
    assert_true(kept > 0 && kept <= 16);
    attestcache_free(c);
}

static void test_zero_disables(void **state)
{
    (void)state;
    attestcache *c = attestcache_new(0);
    assert_non_null(c);
    size_t len;
    attestcache_put(c, "k", 1, "v", 1);
    assert_null(attestcache_get(c, "k", 1, &len));
    attestcache_free(c);
    attestcache_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_zero_disables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
