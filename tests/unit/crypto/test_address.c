/* Address parsing and formatting against the EIP-55 examples and ethers' getAddress. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/address.h"
#include "fixture.h"

static json_t *g_fixture;

static int parse_str(const char *s, uint8_t out[20])
{
    return address_parse(s, strlen(s), out);
}

static void test_eip55_valid(void **state)
{
    json_t *valid = fixture_array(json_object_get(g_fixture, "eip55"), "valid"), *v;
    size_t i;

    assert_true(json_array_size(valid) >= 8);
    json_array_foreach(valid, i, v)
    {
        const char *input = fixture_str(v, "input"), *cs = fixture_str(v, "checksummed"),
                   *lower = fixture_str(v, "lower");
        uint8_t expect[20], got[20];
        char buf[ADDRESS_STRING_SIZE], upper[ADDRESS_STRING_SIZE];

        fixture_hex_exact(lower, expect, 20);
        assert_int_equal(parse_str(input, got), ADDRESS_OK);
        assert_memory_equal(expect, got, 20);
        assert_int_equal(parse_str(cs, got), ADDRESS_OK);
        assert_memory_equal(expect, got, 20);
        assert_int_equal(parse_str(lower, got), ADDRESS_OK);
        assert_memory_equal(expect, got, 20);
        strcpy(upper, lower);
        for (size_t k = 2; k < 42; k++) {
            if (upper[k] >= 'a' && upper[k] <= 'f') {
                upper[k] = (char)(upper[k] - 'a' + 'A');
            }
        }
        assert_int_equal(parse_str(upper, got), ADDRESS_OK);
        assert_memory_equal(expect, got, 20);

        address_format_checksum(expect, buf);
        assert_string_equal(buf, cs);
        address_format_lower(expect, buf);
        assert_string_equal(buf, lower);
    }
}

static void test_eip55_text_examples_are_fixed_points(void **state)
{
    /* The EIP's own mixed-case examples, independent of the fixture file. */
    static const char *const examples[] = {
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    };

    for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
        uint8_t a[20];
        char buf[ADDRESS_STRING_SIZE];

        assert_int_equal(parse_str(examples[i], a), ADDRESS_OK);
        address_format_checksum(a, buf);
        assert_string_equal(buf, examples[i]);
    }
}

static void test_eip55_invalid_checksum(void **state)
{
    json_t *bad = fixture_array(json_object_get(g_fixture, "eip55"), "invalid_checksum"), *v;
    size_t i;

    assert_true(json_array_size(bad) >= 8);
    json_array_foreach(bad, i, v)
    {
        uint8_t out[20];

        memset(out, 0xaa, sizeof(out));
        assert_int_equal(parse_str(json_string_value(v), out), ADDRESS_ECHECKSUM);
        for (size_t k = 0; k < 20; k++) {
            assert_int_equal(out[k], 0xaa);
        }
    }
}

static void test_format_errors(void **state)
{
    static const char *const bad[] = {
        "",
        "0x",
        "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        "005aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        "0X5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beae",
        "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed0",
        "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaeg",
        "0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea d",
        " 0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        "0x0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea",
    };
    uint8_t out[20];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse_str(bad[i], out) != ADDRESS_EFORMAT) {
            fail_msg("'%s' not rejected as EFORMAT", bad[i]);
        }
    }
    /* The length bounds the parse, not a NUL: a valid prefix of a longer buffer is enough. */
    assert_int_equal(address_parse("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaedXYZ", 42, out),
                     ADDRESS_OK);
    assert_int_equal(address_parse("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", 41, out),
                     ADDRESS_EFORMAT);
    /* An embedded NUL is a bad character, not an end of input. */
    assert_int_equal(address_parse("0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea\0d", 42, out),
                     ADDRESS_EFORMAT);
}

static void test_from_pubkey(void **state)
{
    json_t *sigs = fixture_array(g_fixture, "signatures"), *v;
    size_t i;

    json_array_foreach(sigs, i, v)
    {
        uint8_t pub[65], expect[20], got[20];

        fixture_hex_exact(fixture_str(v, "public_key"), pub, 65);
        fixture_hex_exact(fixture_str(v, "address"), expect, 20);
        address_from_pubkey(pub, got);
        assert_memory_equal(expect, got, 20);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eip55_valid),
        cmocka_unit_test(test_eip55_text_examples_are_fixed_points),
        cmocka_unit_test(test_eip55_invalid_checksum),
        cmocka_unit_test(test_format_errors),
        cmocka_unit_test(test_from_pubkey),
    };
    int rc;

    g_fixture = fixture_load(argc, argv);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(g_fixture);
    return rc;
}
