/* ISO 8601 formatting and parsing against values computed with JavaScript's Date. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "core/isotime.h"

static json_t *g_fixture;

static json_t *iso_section(const char *key)
{
    return fixture_array(json_object_get(g_fixture, "isotime"), key);
}

static int parse_str(const char *s, int64_t *ms)
{
    return isotime_parse(s, strlen(s), ms);
}

static void test_format(void **state)
{
    json_t *cases = iso_section("format"), *v;
    size_t i;

    assert_true(json_array_size(cases) >= 8);
    json_array_foreach(cases, i, v)
    {
        char out[ISOTIME_STRING_SIZE];
        int64_t back = 0;

        isotime_format(fixture_int(v, "ms"), out);
        assert_string_equal(out, fixture_str(v, "iso"));
        assert_int_equal(parse_str(out, &back), 0);
        assert_int_equal(back, fixture_int(v, "ms"));
    }
}

static void test_format_clamps(void **state)
{
    char out[ISOTIME_STRING_SIZE];

    isotime_format(INT64_MAX, out);
    assert_string_equal(out, "9999-12-31T23:59:59.999Z");
    isotime_format(INT64_MIN, out);
    assert_string_equal(out, "0000-01-01T00:00:00.000Z");
}

static void test_parse_valid(void **state)
{
    json_t *cases = iso_section("parse_valid"), *v;
    size_t i;

    assert_true(json_array_size(cases) >= 10);
    json_array_foreach(cases, i, v)
    {
        int64_t ms = 0;
        const char *in = fixture_str(v, "input");

        if (parse_str(in, &ms) != 0) {
            fail_msg("'%s' rejected", in);
        }
        if (ms != fixture_int(v, "ms")) {
            fail_msg("'%s' parsed to %lld", in, (long long)ms);
        }
    }
}

static void test_parse_invalid(void **state)
{
    json_t *cases = iso_section("parse_invalid"), *v;
    size_t i;

    assert_true(json_array_size(cases) >= 10);
    json_array_foreach(cases, i, v)
    {
        int64_t ms = 42;
        const char *in = json_string_value(v);

        assert_non_null(in);
        if (parse_str(in, &ms) != -1) {
            fail_msg("'%s' accepted", in);
        }
        assert_int_equal(ms, 42);
    }
}

static void test_leap_days(void **state)
{
    int64_t ms;
    char out[ISOTIME_STRING_SIZE];

    assert_int_equal(parse_str("2024-02-29T00:00:00Z", &ms), 0);
    isotime_format(ms, out);
    assert_string_equal(out, "2024-02-29T00:00:00.000Z");
    assert_int_equal(parse_str("2023-02-29T00:00:00Z", &ms), -1);
    assert_int_equal(parse_str("2000-02-29T00:00:00Z", &ms), 0);
    assert_int_equal(parse_str("1900-02-29T00:00:00Z", &ms), -1);
    assert_int_equal(parse_str("2024-02-29T23:59:59.999+00:00", &ms), 0);
    assert_int_equal(ms, 1709251199999);
}

static void test_offsets(void **state)
{
    int64_t utc, a, b, c;

    assert_int_equal(parse_str("2026-11-21T22:47:26.123Z", &utc), 0);
    assert_int_equal(parse_str("2026-11-22T04:17:26.123+05:30", &a), 0);
    assert_int_equal(parse_str("2026-11-22T04:17:26.123+0530", &b), 0);
    assert_int_equal(parse_str("2026-11-21T12:47:26.123-10:00", &c), 0);
    assert_int_equal(a, utc);
    assert_int_equal(b, utc);
    assert_int_equal(c, utc);
}

static void test_length_bounds_parse(void **state)
{
    int64_t ms;
    const char *s = "2024-01-01T00:00:00Zjunk";

    assert_int_equal(isotime_parse(s, 20, &ms), 0);
    assert_int_equal(ms, 1704067200000);
    assert_int_equal(isotime_parse(s, 19, &ms), -1);
    assert_int_equal(isotime_parse(s, 0, &ms), -1);
}

/* Every millisecond value formats to a string that parses back to itself: walk the whole range
 * with a stride that visits all times of day and both sides of many leap days. */
static void test_round_trip_sweep(void **state)
{
    const int64_t stride = 86400000LL * 97 + 3600000LL * 7 + 60000LL * 13 + 1000LL * 29 + 331;

    for (int64_t ms = ISOTIME_MIN_MS; ms <= ISOTIME_MAX_MS; ms += stride) {
        char out[ISOTIME_STRING_SIZE];
        int64_t back;

        isotime_format(ms, out);
        assert_int_equal(strlen(out), 24);
        if (parse_str(out, &back) != 0 || back != ms) {
            fail_msg("round trip failed for %lld (%s)", (long long)ms, out);
        }
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_format_clamps),
        cmocka_unit_test(test_parse_valid),
        cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_leap_days),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_length_bounds_parse),
        cmocka_unit_test(test_round_trip_sweep),
    };
    int rc;

    g_fixture = fixture_load(argc, argv);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(g_fixture);
    return rc;
}
