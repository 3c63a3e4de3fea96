/* buf: appending, printf, JSON escaping, consuming and resetting a growable buffer. */
#include <stdarg.h>
#include <setjmp.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/buf.h"

static int setup(void **state)
{
    static buf b;

    b = (buf)BUF_INIT;
    *state = &b;
    return 0;
}

static int teardown(void **state)
{
    buf_free(*state);
    return 0;
}

static void assert_buf(const buf *b, const char *want, size_t len)
{
    assert_int_equal(b->len, len);
    assert_memory_equal(buf_cstr(b), want, len);
    assert_int_equal(buf_cstr(b)[len], '\0');
    assert_true(b->cap >= b->len + 1);
}

static void test_empty(void **state)
{
    buf *b = *state;

    assert_null(b->data);
    assert_int_equal(b->len, 0);
    assert_string_equal(buf_cstr(b), "");
    assert_int_equal(buf_append(b, "", 0), 0);
    assert_string_equal(buf_cstr(b), "");
    assert_int_equal(b->len, 0);
}

static void test_append(void **state)
{
    buf *b = *state;

    assert_int_equal(buf_append_str(b, "abc"), 0);
    assert_int_equal(buf_append(b, "defXX", 3), 0);
    assert_buf(b, "abcdef", 6);
    /* Binary data, with a NUL inside. */
    assert_int_equal(buf_append(b, "\0z", 2), 0);
    assert_buf(b, "abcdef\0z", 8);
}

static void test_append_grows(void **state)
{
    buf *b = *state;

    for (int i = 0; i < 10000; i++)
        assert_int_equal(buf_append_str(b, "0123456789"), 0);
    assert_int_equal(b->len, 100000);
    assert_true(b->cap >= 100001);
    for (size_t i = 0; i < b->len; i++)
        if (b->data[i] != (char)('0' + i % 10))
            fail_msg("byte %zu is %c", i, b->data[i]);
    assert_int_equal(b->data[b->len], '\0');
}

static void test_reserve(void **state)
{
    buf *b = *state;

    assert_int_equal(buf_reserve(b, 1000), 0);
    assert_true(b->cap >= 1001);
    assert_int_equal(b->len, 0);
    size_t cap = b->cap;
    char *data = b->data;
    /* Room that is there already does not move the data. */
    assert_int_equal(buf_append(b, "x", 1), 0);
    assert_int_equal(buf_reserve(b, 999), 0);
    assert_int_equal(b->cap, cap);
    assert_ptr_equal(b->data, data);
}

static void test_reserve_overflow_fails(void **state)
{
    buf *b = *state;

    /* No buffer can hold SIZE_MAX more bytes plus a NUL: the request must fail, and the
     * buffer must stay as it was. */
    assert_int_equal(buf_append_str(b, "abc"), 0);
    size_t cap = b->cap;
    assert_int_equal(buf_reserve(b, SIZE_MAX), -1);
    assert_int_equal(buf_reserve(b, SIZE_MAX - 3), -1);
    assert_int_equal(b->cap, cap);
    assert_buf(b, "abc", 3);
}

static void test_printf(void **state)
{
    buf *b = *state;

    assert_int_equal(buf_printf(b, "%d-%s", 42, "x"), 0);
    assert_buf(b, "42-x", 4);
    assert_int_equal(buf_printf(b, "%s", ""), 0);
    assert_buf(b, "42-x", 4);
    assert_int_equal(buf_printf(b, "|%05u|%c", 7u, 'q'), 0);
    assert_buf(b, "42-x|00007|q", 12);
}

static void test_printf_long(void **state)
{
    buf *b = *state;
    char want[1200];

    assert_int_equal(buf_append_str(b, "head:"), 0);
    assert_int_equal(buf_printf(b, "%01000d", 5), 0);
    memcpy(want, "head:", 5);
    memset(want + 5, '0', 999);
    want[1004] = '5';
    assert_buf(b, want, 1005);
}

/* buf_append_uint appends what snprintf's "%llu" writes, in a fresh buffer and at the edge of
 * a full one. */
static void test_append_uint(void **state)
{
    buf *b = *state;
    const unsigned long long vals[] = {
        0, 7, 9, 10, 42, 99, 100, 512, 999, 1000, 65536, 1000000007ULL, ULLONG_MAX};
    char want[4096];
    size_t wlen = 0;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        assert_int_equal(buf_append_uint(b, vals[i]), 0);
        wlen += (size_t)snprintf(want + wlen, sizeof want - wlen, "%llu", vals[i]);
        assert_int_equal(buf_append(b, ",", 1), 0);
        want[wlen++] = ',';
        want[wlen] = '\0';
    }
    assert_buf(b, want, wlen);
    /* a buffer with one byte left before its NUL: the number still fits */
    buf_free(b);
    assert_int_equal(buf_reserve(b, 0), 0);
    size_t fill = b->cap - 2;
    char *pad = malloc(fill);
    assert_non_null(pad);
    memset(pad, 'x', fill);
    assert_int_equal(buf_append(b, pad, fill), 0);
    assert_int_equal(buf_append_uint(b, ULLONG_MAX), 0);
    assert_int_equal(b->len, fill + 20);
    assert_memory_equal(b->data + fill, "18446744073709551615", 21);
    free(pad);
}

/* buf_format_int writes what snprintf's "%lld" writes, the extremes included. */
static void test_format_int(void **state)
{
    (void)state;
    const long long vals[] = {0,
                              1,
                              -1,
                              9,
                              10,
                              99,
                              100,
                              999,
                              1000,
                              -1000,
                              1764160000000LL,
                              1000000000,
                              LLONG_MAX,
                              LLONG_MIN,
                              LLONG_MIN + 1};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char got[BUF_INT_SIZE], want[BUF_INT_SIZE];
        size_t n = buf_format_int(got, vals[i]);
        snprintf(want, sizeof want, "%lld", vals[i]);
        assert_string_equal(got, want);
        assert_int_equal(n, strlen(want));
    }
}

/* Escapes `in` into a fresh buffer and compares with `want`. */
static void check_escape(buf *b, const char *in, size_t len, const char *want)
{
    buf_reset(b, 0);
    assert_int_equal(buf_append_json_escaped(b, in, len), 0);
    assert_string_equal(buf_cstr(b), want);
    assert_int_equal(b->len, strlen(want));
}

static void test_json_escape_specials(void **state)
{
    buf *b = *state;

    check_escape(b, "plain text", 10, "plain text");
    check_escape(b, "a\"b", 3, "a\\\"b");
    check_escape(b, "back\\slash", 10, "back\\\\slash");
    check_escape(b, "line\nnext", 9, "line\\nnext");
    check_escape(b, "col\tcol", 7, "col\\tcol");
    check_escape(b, "\x01", 1, "\\u0001");
    check_escape(b, "\x1f", 1, "\\u001f");
    check_escape(b, "\0", 1, "\\u0000");
    check_escape(b, "a/b", 3, "a/b");
    /* UTF-8 passes through byte for byte. */
    check_escape(b, "caf\xc3\xa9 \xe2\x82\xac", 9, "caf\xc3\xa9 \xe2\x82\xac");
}

static void test_json_escape_empty_input(void **state)
{
    buf *b = *state;

    /* Escaping nothing into a fresh buffer leaves it a valid, empty C string. Only the first
     * byte is read: an unterminated buffer must fail the test, not overrun the heap. */
    assert_int_equal(buf_append_json_escaped(b, "", 0), 0);
    assert_int_equal(b->len, 0);
    assert_int_equal(buf_cstr(b)[0], '\0');
}

static void test_cstr_after_reserve_is_empty(void **state)
{
    buf *b = *state;

    /* buf_cstr() is "always a valid C string": also when only room was made. */
    assert_int_equal(buf_reserve(b, 10), 0);
    assert_int_equal(b->len, 0);
    assert_int_equal(buf_cstr(b)[0], '\0'); /* only the first byte: see above */
}

static void test_json_escape_all_controls_round_trip(void **state)
{
    /* Every byte 1..127 escaped, quoted and parsed by jansson gives the same string back. */
    buf *b = *state;
    char in[127];

    for (int i = 0; i < 127; i++)
        in[i] = (char)(i + 1);
    assert_int_equal(buf_append_str(b, "\""), 0);
    assert_int_equal(buf_append_json_escaped(b, in, sizeof in), 0);
    assert_int_equal(buf_append_str(b, "\""), 0);
    for (size_t i = 1; i + 1 < b->len; i++)
        if ((unsigned char)b->data[i] < 0x20)
            fail_msg("raw control byte 0x%02x at %zu", (unsigned char)b->data[i], i);

    json_error_t jerr;
    json_t *v = json_loads(buf_cstr(b), JSON_DECODE_ANY, &jerr);
    if (!v)
        fail_msg("jansson rejects the escaped text: %s", jerr.text);
    /* Compared before the assertions so a failure does not leak v. */
    bool same = json_is_string(v) && json_string_length(v) == sizeof in &&
                memcmp(json_string_value(v), in, sizeof in) == 0;
    json_decref(v);
    assert_true(same);
}

static void test_json_escape_appends(void **state)
{
    buf *b = *state;

    assert_int_equal(buf_append_str(b, "{\"k\":\""), 0);
    assert_int_equal(buf_append_json_escaped(b, "say \"hi\"\n", 9), 0);
    assert_int_equal(buf_append_str(b, "\"}"), 0);
    assert_string_equal(buf_cstr(b), "{\"k\":\"say \\\"hi\\\"\\n\"}");
}

static void test_json_escape_long_input_grows(void **state)
{
    buf *b = *state;
    char in[3000];

    /* Every byte doubles or grows sixfold: the buffer must grow past the first reserve. */
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = i % 2 ? '"' : '\x02';
    assert_int_equal(buf_append_json_escaped(b, in, sizeof in), 0);
    assert_int_equal(b->len, 1500 * 2 + 1500 * 6);
    assert_memory_equal(b->data, "\\u0002\\\"", 8);
    assert_memory_equal(b->data + b->len - 8, "\\u0002\\\"", 8);
    assert_int_equal(b->data[b->len], '\0');
}

static void test_consume(void **state)
{
    buf *b = *state;

    assert_int_equal(buf_append_str(b, "hello world"), 0);
    buf_consume(b, 0);
    assert_buf(b, "hello world", 11);
    buf_consume(b, 6);
    assert_buf(b, "world", 5);
    buf_consume(b, 5);
    assert_buf(b, "", 0);
    assert_int_equal(buf_append_str(b, "again"), 0);
    buf_consume(b, 100);
    assert_buf(b, "", 0);
    assert_int_equal(buf_append_str(b, "ok"), 0);
    assert_buf(b, "ok", 2);
}

static void test_consume_empty(void **state)
{
    buf *b = *state;

    buf_consume(b, 0);
    buf_consume(b, 10);
    assert_int_equal(b->len, 0);
    assert_string_equal(buf_cstr(b), "");
}

static void test_reset_keeps_small(void **state)
{
    buf *b = *state;

    assert_int_equal(buf_append_str(b, "abc"), 0);
    char *data = b->data;
    size_t cap = b->cap;
    assert_true(cap <= 1024);
    buf_reset(b, 1024);
    assert_ptr_equal(b->data, data);
    assert_int_equal(b->cap, cap);
    assert_int_equal(b->len, 0);
    assert_string_equal(buf_cstr(b), "");
    assert_int_equal(buf_append_str(b, "x"), 0);
    assert_buf(b, "x", 1);
}

static void test_reset_frees_large(void **state)
{
    buf *b = *state;

    assert_int_equal(buf_reserve(b, 5000), 0);
    assert_int_equal(buf_append_str(b, "abc"), 0);
    buf_reset(b, 1024);
    assert_null(b->data);
    assert_int_equal(b->cap, 0);
    assert_int_equal(b->len, 0);
    assert_string_equal(buf_cstr(b), "");

    assert_int_equal(buf_append_str(b, "abc"), 0);
    buf_reset(b, 0);
    assert_null(b->data);
    assert_int_equal(b->len, 0);
    assert_int_equal(buf_append_str(b, "after"), 0);
    assert_buf(b, "after", 5);
}

static void test_free_twice(void **state)
{
    buf *b = *state;

    assert_int_equal(buf_append_str(b, "abc"), 0);
    buf_free(b);
    assert_null(b->data);
    assert_int_equal(b->len, 0);
    assert_int_equal(b->cap, 0);
    buf_free(b);
    assert_string_equal(buf_cstr(b), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_grows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserve_overflow_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_printf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_printf_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_uint, setup, teardown),
        cmocka_unit_test(test_format_int),
        cmocka_unit_test_setup_teardown(test_json_escape_specials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_escape_empty_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cstr_after_reserve_is_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_escape_all_controls_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_escape_appends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_escape_long_input_grows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consume_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_keeps_small, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_frees_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_twice, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
