/* multicall: aggregate3's call data byte for byte as ethers' Interface.encodeFunctionData makes
 * it, and its answer (ethers' AbiCoder.encode of (bool,bytes)[]) decoded into each call's
 * outcome; decimal uint256s both ways; and hostile answers (short, offsets past the end, a
 * count that differs, a bool that is not one) refused, never read past. The vectors were made
 * with ethers 6 (tests/node) and are pasted here: they are ethers' answers, not ours. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/hex.h"
#include "rpc/multicall.h"

static const char aggregate3_hex[] =
    "0x82ad56cb"
    "0000000000000000000000000000000000000000000000000000000000000020"
    "0000000000000000000000000000000000000000000000000000000000000003"
    "0000000000000000000000000000000000000000000000000000000000000060"
    "0000000000000000000000000000000000000000000000000000000000000120"
    "00000000000000000000000000000000000000000000000000000000000001e0"
    "00000000000000000000000000000000000000000000000000000000000000aa"
    "0000000000000000000000000000000000000000000000000000000000000001"
    "0000000000000000000000000000000000000000000000000000000000000060"
    "0000000000000000000000000000000000000000000000000000000000000024"
    "70a082310000000000000000000000005aaeb6053f3e94c9b9a09f33669435e7"
    "ef1beaed00000000000000000000000000000000000000000000000000000000"
    "00000000000000000000000000000000000000000000000000000000000000aa"
    "0000000000000000000000000000000000000000000000000000000000000001"
    "0000000000000000000000000000000000000000000000000000000000000060"
    "0000000000000000000000000000000000000000000000000000000000000024"
    "6352211e00000000000000000000000000000000000000000000000000000000"
    "0000000700000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000ca11bde05977b3631167028862be2a173976ca11"
    "0000000000000000000000000000000000000000000000000000000000000001"
    "0000000000000000000000000000000000000000000000000000000000000060"
    "0000000000000000000000000000000000000000000000000000000000000004"
    "42cbb15c00000000000000000000000000000000000000000000000000000000";

/* [[true, uint256 1000], [false, 0x08c379a0], [true, uint256 123456]] */
static const char results_hex[] =
    "0000000000000000000000000000000000000000000000000000000000000020"
    "0000000000000000000000000000000000000000000000000000000000000003"
    "0000000000000000000000000000000000000000000000000000000000000060"
    "00000000000000000000000000000000000000000000000000000000000000e0"
    "0000000000000000000000000000000000000000000000000000000000000160"
    "0000000000000000000000000000000000000000000000000000000000000001"
    "0000000000000000000000000000000000000000000000000000000000000040"
    "0000000000000000000000000000000000000000000000000000000000000020"
    "00000000000000000000000000000000000000000000000000000000000003e8"
    "0000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000040"
    "0000000000000000000000000000000000000000000000000000000000000004"
    "08c379a000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000001"
    "0000000000000000000000000000000000000000000000000000000000000040"
    "0000000000000000000000000000000000000000000000000000000000000020"
    "000000000000000000000000000000000000000000000000000000000001e240";

static void addr(const char *hex, uint8_t out[20])
{
    assert_int_equal(hex_decode(hex + 2, 40, out, 20), 0);
}

static void test_aggregate3_as_ethers_encodes_it(void **state)
{
    (void)state;
    uint8_t who[20], token[20], mc[20];
    addr("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", who);
    addr("0x00000000000000000000000000000000000000aa", token);
    addr("0xca11bde05977b3631167028862be2a173976ca11", mc);
    multicall_call calls[3];
    memcpy(calls[0].target, token, 20);
    multicall_balance_of(&calls[0], who);
    memcpy(calls[1].target, token, 20);
    u256 seven;
    assert_int_equal(u256_from_decimal("7", 1, &seven), 0);
    multicall_owner_of(&calls[1], &seven);
    multicall_block_number(&calls[2], mc);
    buf out = BUF_INIT;
    assert_int_equal(multicall_encode(calls, 3, &out), 0);
    assert_int_equal(out.len, sizeof aggregate3_hex - 1);
    assert_memory_equal(out.data, aggregate3_hex, out.len);
    buf_free(&out);
    /* ethers: balanceOf(address,uint256)(who, 5) and getEthBalance(who) */
    u256 five;
    u256_from_decimal("5", 1, &five);
    multicall_call c;
    multicall_balance_of_1155(&c, who, &five);
    char hex[2 * MULTICALL_DATA_MAX + 1];
    hex_encode(c.data, c.len, hex);
    assert_string_equal(hex, "00fdd58e0000000000000000000000005aaeb6053f3e94c9b9a09f33669435e7"
                             "ef1beaed0000000000000000000000000000000000000000000000000000000000"
                             "000005");
    multicall_eth_balance(&c, mc, who);
    hex_encode(c.data, c.len, hex);
    assert_string_equal(hex, "4d2301cc0000000000000000000000005aaeb6053f3e94c9b9a09f33669435e7"
                             "ef1beaed");
    assert_memory_equal(c.target, mc, 20);
}

static uint8_t results[sizeof results_hex / 2];

static void test_results_decoded(void **state)
{
    (void)state;
    size_t len = (sizeof results_hex - 1) / 2;
    assert_int_equal(hex_decode(results_hex, sizeof results_hex - 1, results, len), 0);
    multicall_result r[3];
    assert_int_equal(multicall_decode(results, len, r, 3), 0);
    u256 v;
    char dec[79];
    assert_true(r[0].ok);
    assert_true(multicall_word(&r[0], &v));
    u256_to_decimal(&v, dec);
    assert_string_equal(dec, "1000");
    assert_false(r[1].ok); /* the call that failed fails alone */
    assert_int_equal(r[1].len, 4);
    assert_false(multicall_word(&r[1], &v));
    assert_true(multicall_word(&r[2], &v));
    u256_to_decimal(&v, dec);
    assert_string_equal(dec, "123456");
    /* a count that is not the batch's */
    assert_int_equal(multicall_decode(results, len, r, 2), -1);
    /* every truncation is refused, none read past its end (ASan would say) */
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, results, cut);
        assert_int_equal(multicall_decode(copy, cut, r, 3), -1);
        free(copy);
    }
    /* an offset past the end, and a bool that is not 0 or 1 */
    uint8_t bad[sizeof results];
    memcpy(bad, results, len);
    bad[2 * 32 + 31] = 0xff;
    assert_int_equal(multicall_decode(bad, len, r, 3), -1);
    memcpy(bad, results, len);
    bad[5 * 32 + 31] = 2;
    assert_int_equal(multicall_decode(bad, len, r, 3), -1);
    memcpy(bad, results, len);
    bad[1 * 32 + 7] = 1; /* a count above 2^64 */
    assert_int_equal(multicall_decode(bad, len, r, 3), -1);
}

static void test_u256_decimal(void **state)
{
    (void)state;
    static const char max[] =
        "115792089237316195423570985008687907853269984665640564039457584007913129639935";
    u256 v;
    char out[79];
    assert_int_equal(u256_from_decimal(max, sizeof max - 1, &v), 0);
    for (int k = 0; k < 32; k++)
        assert_int_equal(v.b[k], 0xff);
    u256_to_decimal(&v, out);
    assert_string_equal(out, max);
    static const char over[] =
        "115792089237316195423570985008687907853269984665640564039457584007913129639936";
    assert_int_equal(u256_from_decimal(over, sizeof over - 1, &v), -1);
    assert_int_equal(u256_from_decimal("12a", 3, &v), -1);
    assert_int_equal(u256_from_decimal("", 0, &v), -1);
    assert_int_equal(u256_from_decimal("0", 1, &v), 0);
    u256_to_decimal(&v, out);
    assert_string_equal(out, "0");
    u256 a, b;
    u256_from_decimal("1000000000000000000", 19, &a);
    u256_from_decimal("999999999999999999", 18, &b);
    assert_true(u256_cmp(&a, &b) > 0);
    u256_to_decimal(&a, out);
    assert_string_equal(out, "1000000000000000000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aggregate3_as_ethers_encodes_it),
        cmocka_unit_test(test_results_decoded),
        cmocka_unit_test(test_u256_decimal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
