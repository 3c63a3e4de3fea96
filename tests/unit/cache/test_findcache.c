/* findcache: a page is given back under its key only while the read cache is on, in the
 * generation it was made in, and no key it marked has changed; a page whose keys changed while
 * it was made is not kept; more marks or bytes than allowed are not kept; the byte budget
 * holds; without a read cache there is no page cache. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache/findcache.h"

/* The caches under test, freed by teardown also when an assertion cut the test short. */
static readcache *g_rc;
static findcache *g_fc;

static int setup(void **state)
{
    (void)state;
    g_rc = readcache_new(1 << 20);
    assert_non_null(g_rc);
    readcache_set_enabled(g_rc, true);
    g_fc = findcache_new(1 << 20, g_rc);
    assert_non_null(g_fc);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    findcache_free(g_fc);
    readcache_free(g_rc);
    g_fc = NULL;
    g_rc = NULL;
    return 0;
}

/* A page read from the given keys: its marks, taken now. */
typedef struct made {
    uint64_t gen;
    readcache_mark marks[8];
    size_t n;
} made;

static made make(const char *const *keys, size_t n)
{
    made m = {.gen = findcache_generation(g_fc), .n = n};
    for (size_t i = 0; i < n; i++)
        m.marks[i] = findcache_mark(g_fc, keys[i], strlen(keys[i]));
    return m;
}

static void put(const char *key, const made *m, const char *body)
{
    findcache_put(g_fc, key, strlen(key), m->gen, m->marks, m->n, body, strlen(body));
}

/* The body under key, or NULL, compared with want (NULL: a miss). */
static void expect(const char *key, const char *want)
{
    size_t len = 0;
    const char *b = findcache_get(g_fc, key, strlen(key), &len);
    if (!want) {
        assert_null(b);
        return;
    }
    assert_non_null(b);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(b, want, len);
}

static void invalidate(const char *key)
{
    readcache_invalidate(g_rc, key, strlen(key));
}

static const char *const KEYS[] = {"wallet:{0xa}:any", "ent:{c-1}", "ent:{c-1}:owners"};

static void test_kept_until_a_key_changes(void **state)
{
    (void)state;
    made m = make(KEYS, 3);
    put("page", &m, "{\"data\":[1]}");
    expect("page", "{\"data\":[1]}");
    expect("page", "{\"data\":[1]}");
    expect("other page", NULL);
    invalidate("unrelated:key");
    expect("page", "{\"data\":[1]}");
    invalidate("ent:{c-1}:owners");
    expect("page", NULL);
    const findcache_stats *s = findcache_get_stats(g_fc);
    assert_int_equal(s->hits, 3);
    assert_int_equal(s->misses, 1);
    assert_int_equal(s->stale, 1);
    assert_int_equal(s->entries, 0);
    assert_int_equal(s->bytes, 0);
}

static void test_a_change_while_made_is_not_kept(void **state)
{
    (void)state;
    made m = make(KEYS, 3);
    invalidate("ent:{c-1}"); /* arrives while the page's reads are out */
    put("page", &m, "old");
    assert_int_equal(findcache_get_stats(g_fc)->entries, 0);
    assert_int_equal(findcache_get_stats(g_fc)->dropped, 1);
    expect("page", NULL);
}

static void test_off_or_flushed_answers_nothing(void **state)
{
    (void)state;
    made m = make(KEYS, 3);
    put("page", &m, "x");
    readcache_flush(g_rc);
    expect("page", NULL);
    m = make(KEYS, 3);
    put("page", &m, "y");
    expect("page", "y");
    readcache_set_enabled(g_rc, false);
    assert_false(findcache_active(g_fc));
    expect("page", NULL);
    /* on again: a page made before is of another generation */
    readcache_set_enabled(g_rc, true);
    put("page", &m, "z");
    expect("page", NULL);
}

static void test_limits(void **state)
{
    (void)state;
    readcache_mark *many = calloc(FINDCACHE_MAX_MARKS + 1, sizeof *many);
    assert_non_null(many);
    for (size_t i = 0; i <= FINDCACHE_MAX_MARKS; i++)
        many[i] = findcache_mark(g_fc, "k", 1);
    uint64_t gen = findcache_generation(g_fc);
    findcache_put(g_fc, "a", 1, gen, many, FINDCACHE_MAX_MARKS + 1, "x", 1);
    expect("a", NULL);
    findcache_put(g_fc, "a", 1, gen, many, FINDCACHE_MAX_MARKS, "x", 1);
    expect("a", "x");
    free(many);
    char *big = calloc(FINDCACHE_MAX_BODY + 1, 1);
    assert_non_null(big);
    findcache_put(g_fc, "b", 1, gen, NULL, 0, big, FINDCACHE_MAX_BODY + 1);
    expect("b", NULL);
    free(big);
}

static void test_budget_holds(void **state)
{
    (void)state;
    findcache_free(g_fc);
    g_fc = findcache_new(64 * 1024, g_rc);
    assert_non_null(g_fc);
    char body[4000], key[32];
    memset(body, 'x', sizeof body - 1);
    body[sizeof body - 1] = '\0';
    made m = make(KEYS, 3);
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "page %d", i);
        put(key, &m, body);
        assert_true(findcache_get_stats(g_fc)->bytes <= 64 * 1024);
    }
    expect("page 199", body);
    assert_true(findcache_get_stats(g_fc)->entries > 4);
}

static void test_needs_a_read_cache(void **state)
{
    (void)state;
    assert_null(findcache_new(1 << 20, NULL));
    assert_null(findcache_new(0, g_rc));
    assert_false(findcache_active(NULL));
    size_t len;
    assert_null(findcache_get(NULL, "a", 1, &len));
    findcache_put(NULL, "a", 1, 0, NULL, 0, "x", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kept_until_a_key_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_change_while_made_is_not_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_off_or_flushed_answers_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_needs_a_read_cache, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
