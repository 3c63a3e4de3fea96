/* The SIWE message builder and the isValidSignature call data, against texts made by the siwe
 * library and ethers (Interface.encodeFunctionData) from the same inputs. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/abi.h"
#include "crypto/hex.h"
#include "crypto/siwe.h"

static const char HEAD[] = "0x1626ba7e"
                           "1111111111111111111111111111111111111111111111111111111111111111"
                           "0000000000000000000000000000000000000000000000000000000000000040";

static void check_call(const uint8_t *sig, size_t len, const char *expect_tail)
{
    uint8_t hash[32];
    memset(hash, 0x11, sizeof hash);
    size_t cap = abi_is_valid_signature_size(len);
    char *out = malloc(cap);
    assert_non_null(out);
    size_t n = abi_is_valid_signature(hash, sig, len, out, cap);
    assert_int_equal(n, cap - 1);
    assert_int_equal(n, strlen(out));
    assert_memory_equal(out, HEAD, strlen(HEAD));
    assert_string_equal(out + strlen(HEAD), expect_tail);
    /* One byte short: refused, nothing claimed written. */
    assert_int_equal(abi_is_valid_signature(hash, sig, len, out, cap - 1), 0);
    free(out);
}

static void test_call_data(void **state)
{
    (void)state;
    uint8_t sig[65] = {0};
    check_call(sig, 0, "0000000000000000000000000000000000000000000000000000000000000000");
    memcpy(sig, "\xaa\xbb\xcc", 3);
    check_call(sig, 3,
               "0000000000000000000000000000000000000000000000000000000000000003"
               "aabbcc0000000000000000000000000000000000000000000000000000000000");
    memset(sig, 0xab, 32);
    check_call(sig, 32,
               "0000000000000000000000000000000000000000000000000000000000000020"
               "abababababababababababababababababababababababababababababababab");
    memset(sig, 0xcd, 65);
    check_call(sig, 65,
               "0000000000000000000000000000000000000000000000000000000000000041"
               "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
               "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
               "cd00000000000000000000000000000000000000000000000000000000000000");
}

static void test_magic_value(void **state)
{
    (void)state;
    const char *magic = "0x1626ba7e00000000000000000000000000000000000000000000000000000000";
    assert_true(abi_is_magic_value(magic, strlen(magic)));
    assert_true(abi_is_magic_value(magic + 2, strlen(magic) - 2));
    const char *other = "0x1626ba7f00000000000000000000000000000000000000000000000000000000";
    assert_false(abi_is_magic_value(other, strlen(other)));
    const char *dirty = "0x1626ba7e00000000000000000000000000000000000000000000000000000001";
    assert_false(abi_is_magic_value(dirty, strlen(dirty)));
    assert_false(abi_is_magic_value("0x", 2));
    assert_false(abi_is_magic_value("0x1626ba7e", 10));
}

/* siwe 3 prepareMessage() of the same fields; its EIP-191 hash from ethers.hashMessage. */
static const char SIWE_EXPECT[] = "example.org wants you to sign in with your Ethereum account:\n"
                                  "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23\n"
                                  "\n"
                                  "Sign in to example.org. It costs no gas.\n"
                                  "\n"
                                  "URI: https://example.org/app\n"
                                  "Version: 1\n"
                                  "Chain ID: 5\n"
                                  "Nonce: 34202475c93f224a6ca01f397a66c7e4\n"
                                  "Issued At: 1972-04-13T08:00:00.000Z\n"
                                  "Expiration Time: 1972-04-13T10:00:00.000Z";
static const char SIWE_HASH[] = "1ef18711d3809954c7c7300506bbf7ec2bafb7ceccb0ae257b270baa37217407";

static void test_siwe_message(void **state)
{
    (void)state;
    const char *secret = "unit-secret";
    siwe_params p = {.domain = "example.org",
                     .uri = "https://example.org/app",
                     .chain_id = 5,
                     .secret = (const uint8_t *)secret,
                     .secret_len = strlen(secret),
                     .epoch_seconds = 3600};
    uint8_t addr[20], hash[32];
    assert_int_equal(hex_decode("2c7536e3605d9c16a7a3d7b1898e529396a65c23", 40, addr, 20), 0);
    size_t cap = siwe_message_cap(&p);
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n = siwe_message(&p, addr, 20000, buf, cap);
    assert_int_equal(n, strlen(SIWE_EXPECT));
    assert_string_equal(buf, SIWE_EXPECT);
    /* Too small a buffer: 0. */
    assert_int_equal(siwe_message(&p, addr, 20000, buf, n), 0);
    assert_int_equal(siwe_hash(&p, addr, 20000, hash), 0);
    char hex[65];
    hex_encode(hash, 32, hex);
    assert_string_equal(hex, SIWE_HASH);
    /* Another epoch, another nonce and times. */
    assert_true(siwe_message(&p, addr, 20001, buf, cap) > 0);
    assert_string_not_equal(buf, SIWE_EXPECT);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_data),
        cmocka_unit_test(test_magic_value),
        cmocka_unit_test(test_siwe_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
