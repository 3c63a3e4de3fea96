/* query: decoding of query strings, repeated keys, bad escapes and empty pairs. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/arena.h"
#include "http/query.h"

typedef struct parsed {
    arena pool;
    req_param *ps;
    size_t n;
    const char *bad_key;
    int rc;
} parsed;

static int setup(void **state)
{
    static parsed p;

    memset(&p, 0, sizeof p);
    *state = &p;
    return 0;
}

static int teardown(void **state)
{
    parsed *p = *state;

    arena_reset(&p->pool);
    return 0;
}

/* Parses the first `len` bytes of `q`; the outputs start as junk so they must be written. */
static int parse_n(parsed *p, const char *q, size_t len)
{
    arena_reset(&p->pool);
    p->ps = (req_param *)(uintptr_t)1;
    p->n = 77;
    p->bad_key = "junk";
    p->rc = query_parse(&p->pool, q, len, &p->ps, &p->n, &p->bad_key);
    return p->rc;
}

static int parse(parsed *p, const char *q)
{
    return parse_n(p, q, strlen(q));
}

static void assert_pair(const req_param *r, const char *key, const char *val, size_t val_len)
{
    assert_int_equal(r->key_len, strlen(key));
    assert_string_equal(r->key, key);
    assert_int_equal(r->val_len, val_len);
    assert_memory_equal(r->val, val, val_len);
    assert_int_equal(r->val[val_len], '\0');
}

static void test_empty_query(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, ""), QUERY_OK);
    assert_int_equal(p->n, 0);
    assert_null(p->bad_key);
}

static void test_simple_pairs_in_order(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, "a=1&b=x%20y&address=0xAbC"), QUERY_OK);
    assert_null(p->bad_key);
    assert_int_equal(p->n, 3);
    assert_pair(&p->ps[0], "a", "1", 1);
    assert_pair(&p->ps[1], "b", "x y", 3);
    assert_pair(&p->ps[2], "address", "0xAbC", 5);
}

static void test_plus_is_space(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, "q=a+b++c&k+1=v&lit=%2B"), QUERY_OK);
    assert_int_equal(p->n, 3);
    assert_pair(&p->ps[0], "q", "a b  c", 6);
    assert_pair(&p->ps[1], "k 1", "v", 1);
    assert_pair(&p->ps[2], "lit", "+", 1);
}

static void test_percent_decoding(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, "a%5Fb=%4a%4A&u=%C3%A9&amp=%26%3D&pct=%25"), QUERY_OK);
    assert_int_equal(p->n, 4);
    assert_pair(&p->ps[0], "a_b", "JJ", 2);
    assert_pair(&p->ps[1], "u", "\xc3\xa9", 2);
    /* An escaped & or = is data, not a separator. */
    assert_pair(&p->ps[2], "amp", "&=", 2);
    assert_pair(&p->ps[3], "pct", "%", 1);
}

static void test_repeated_key(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, "a=1&b=2&a=3"), QUERY_EREPEATED);
    assert_non_null(p->bad_key);
    assert_string_equal(p->bad_key, "a");

    /* The same value twice is still a repeat. */
    assert_int_equal(parse(p, "signature=0x1&signature=0x1"), QUERY_EREPEATED);
    assert_string_equal(p->bad_key, "signature");

    /* Keys compare after decoding. */
    assert_int_equal(parse(p, "ab=1&%61%62=2"), QUERY_EREPEATED);
    assert_string_equal(p->bad_key, "ab");

    /* Keys without a value repeat too. */
    assert_int_equal(parse(p, "flag&flag"), QUERY_EREPEATED);
    assert_string_equal(p->bad_key, "flag");
    assert_int_equal(parse(p, "flag&flag="), QUERY_EREPEATED);
    assert_string_equal(p->bad_key, "flag");
}

static void test_keys_are_case_sensitive_and_exact(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, "a=1&A=2&aa=3&a1=4"), QUERY_OK);
    assert_int_equal(p->n, 4);
    assert_pair(&p->ps[1], "A", "2", 1);
    assert_pair(&p->ps[2], "aa", "3", 1);
}

static void test_bad_escapes_in_value(void **state)
{
    static const char *const bad[] = {
        "a=%", "a=%4", "a=%zz", "a=%00", "a=%g0", "a=%0g", "a=x%", "a=%%41", "a=%&b=1", "a=%4&b=1",
    };
    parsed *p = *state;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse(p, bad[i]) != QUERY_EENCODING)
            fail_msg("\"%s\": expected QUERY_EENCODING, got %d", bad[i], p->rc);
        /* The key is known: it is named. */
        assert_non_null(p->bad_key);
        assert_string_equal(p->bad_key, "a");
    }
}

static void test_bad_escapes_in_key(void **state)
{
    static const char *const bad[] = {"%=1", "%4=1", "%zz=1", "%00=1", "a%00b", "ok=1&%x1=2"};
    parsed *p = *state;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (parse(p, bad[i]) != QUERY_EENCODING)
            fail_msg("\"%s\": expected QUERY_EENCODING, got %d", bad[i], p->rc);
}

static void test_escape_cut_by_len(void **state)
{
    parsed *p = *state;

    /* "a=%41" cut to four bytes ends inside the escape. */
    assert_int_equal(parse_n(p, "a=%41", 4), QUERY_EENCODING);
    assert_int_equal(parse_n(p, "a=%41", 5), QUERY_OK);
    assert_pair(&p->ps[0], "a", "A", 1);
    /* Bytes past len are not part of the query. */
    assert_int_equal(parse_n(p, "a=1&a=2", 3), QUERY_OK);
    assert_int_equal(p->n, 1);
    assert_pair(&p->ps[0], "a", "1", 1);
}

static void test_empty_pairs_are_skipped(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, "a=1&&b=2"), QUERY_OK);
    assert_int_equal(p->n, 2);
    assert_pair(&p->ps[0], "a", "1", 1);
    assert_pair(&p->ps[1], "b", "2", 1);

    assert_int_equal(parse(p, "&a=1&"), QUERY_OK);
    assert_int_equal(p->n, 1);
    assert_pair(&p->ps[0], "a", "1", 1);

    assert_int_equal(parse(p, "&&&"), QUERY_OK);
    assert_int_equal(p->n, 0);
    assert_null(p->bad_key);
}

static void test_key_without_value(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, "multiple&x=1&empty="), QUERY_OK);
    assert_int_equal(p->n, 3);
    assert_pair(&p->ps[0], "multiple", "", 0);
    assert_pair(&p->ps[1], "x", "1", 1);
    assert_pair(&p->ps[2], "empty", "", 0);
}

static void test_value_may_hold_equals(void **state)
{
    parsed *p = *state;

    assert_int_equal(parse(p, "a=b=c&d==="), QUERY_OK);
    assert_int_equal(p->n, 2);
    assert_pair(&p->ps[0], "a", "b=c", 3);
    assert_pair(&p->ps[1], "d", "==", 2);
}

static void test_many_params(void **state)
{
    parsed *p = *state;
    char q[8192];
    size_t len = 0;

    for (int i = 0; i < 500; i++)
        len += (size_t)snprintf(q + len, sizeof q - len, "%sk%d=v%d", i ? "&" : "", i, i);
    assert_true(len < sizeof q);
    assert_int_equal(parse_n(p, q, len), QUERY_OK);
    assert_int_equal(p->n, 500);
    assert_pair(&p->ps[0], "k0", "v0", 2);
    assert_pair(&p->ps[499], "k499", "v499", 4);

    /* One repeat at the very end is still found. */
    len += (size_t)snprintf(q + len, sizeof q - len, "&k0=again");
    assert_int_equal(parse_n(p, q, len), QUERY_EREPEATED);
    assert_string_equal(p->bad_key, "k0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_empty_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_simple_pairs_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plus_is_space, setup, teardown),
        cmocka_unit_test_setup_teardown(test_percent_decoding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repeated_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_are_case_sensitive_and_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_escapes_in_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_escapes_in_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escape_cut_by_len, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_pairs_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_without_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_value_may_hold_equals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_params, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
