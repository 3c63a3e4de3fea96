/* Hex encoding and strict decoding: every byte value, every character, both decode paths (up to
 * and over the one-pass size), and a failed decode leaving its output untouched. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/hex.h"

static void test_every_byte_round_trips(void **state)
{
    (void)state;
    uint8_t in[256], back[256];
    char hex[513], want[3];
    for (int i = 0; i < 256; i++)
        in[i] = (uint8_t)i;
    hex_encode(in, 256, hex);
    assert_int_equal(strlen(hex), 512);
    for (int i = 0; i < 256; i++) {
        snprintf(want, sizeof want, "%02x", i);
        assert_memory_equal(hex + 2 * i, want, 2);
    }
    /* 256 bytes: over the one-pass size; each short length goes the one-pass way. */
    assert_int_equal(hex_decode(hex, 512, back, 256), 0);
    assert_memory_equal(back, in, 256);
    for (size_t n = 0; n <= 130; n++) {
        memset(back, 0xee, sizeof back);
        assert_int_equal(hex_decode(hex + 2 * (256 - n), 2 * n, back, n), 0);
        assert_memory_equal(back, in + 256 - n, n);
    }
    for (size_t i = 0; i < 512; i++)
        hex[i] = (char)(hex[i] >= 'a' ? hex[i] - 'a' + 'A' : hex[i]);
    assert_int_equal(hex_decode(hex, 512, back, 256), 0);
    assert_memory_equal(back, in, 256);
}

static void test_every_character_judged(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        bool digit = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        int value = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
        assert_int_equal(hex_digit_value((char)c), digit ? value : -1);
        /* In either position of a pair, at the start or the end, of a short and a long input. */
        for (size_t n = 1; n <= 200; n += 199) {
            char s[400];
            uint8_t out[200];
            memset(s, '7', sizeof s);
            const size_t where[] = {0, 1, 2 * n - 2, 2 * n - 1};
            for (size_t w = 0; w < 4; w++) {
                size_t at = where[w];
                s[at] = (char)c;
                memset(out, 0xaa, sizeof out);
                int rc = hex_decode(s, 2 * n, out, n);
                assert_int_equal(rc, digit ? 0 : -1);
                if (!digit)
                    for (size_t i = 0; i < n; i++)
                        assert_int_equal(out[i], 0xaa);
                else
                    assert_int_equal(out[at / 2], at % 2 ? 0x70 | value : value << 4 | 7);
                s[at] = '7';
            }
        }
    }
}

static void test_length_must_match(void **state)
{
    (void)state;
    uint8_t out[4] = {1, 2, 3, 4};
    assert_int_equal(hex_decode("abc", 3, out, 2), -1);
    assert_int_equal(hex_decode("abcdef", 6, out, 2), -1);
    assert_int_equal(hex_decode("", 0, out, 0), 0);
    assert_int_equal(out[0], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_byte_round_trips),
        cmocka_unit_test(test_every_character_judged),
        cmocka_unit_test(test_length_must_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
