/* token: a new session token parses back to its address, hash and id; two tokens differ; every
 * malformed form (prefix, length, case, characters) is refused; the hash is keccak256 of the
 * whole token (against a value computed here with the crypto layer's own keccak). */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "auth/token.h"
#include "crypto/hex.h"
#include "crypto/keccak.h"

static const uint8_t ADDR[20] = {0xab, 0x58, 0x01, 0xa7, 0xd3, 0x98, 0x35, 0x1b, 0x8b, 0xe1,
                                 0x1c, 0x43, 0x9e, 0x05, 0xc5, 0xb3, 0x25, 0x9a, 0xec, 0x9b};

static void test_new_parses_back(void **state)
{
    (void)state;
    char s[TOKEN_SESSION_LEN + 1], s2[TOKEN_SESSION_LEN + 1];
    token made, parsed, other;
    assert_int_equal(token_new_session(ADDR, s, &made), 0);
    assert_int_equal(strlen(s), TOKEN_SESSION_LEN);
    assert_memory_equal(s, "es_ab5801a7d398351b8be11c439e05c5b3259aec9b", 43);
    assert_true(token_parse_session(s, strlen(s), &parsed));
    assert_memory_equal(parsed.addr, ADDR, 20);
    assert_string_equal(parsed.address, "0xab5801a7d398351b8be11c439e05c5b3259aec9b");
    assert_string_equal(parsed.hash, made.hash);
    assert_string_equal(parsed.id, made.id);
    assert_int_equal(strlen(parsed.id), TOKEN_ID_LEN);
    assert_memory_equal(parsed.id, parsed.hash, TOKEN_ID_LEN);
    uint8_t h[32];
    char hx[65];
    keccak256(s, TOKEN_SESSION_LEN, h);
    hex_encode(h, 32, hx);
    assert_string_equal(parsed.hash, hx);
    assert_true(token_hash_equal(parsed.hash, hx));
    hx[63] = hx[63] == '0' ? '1' : '0';
    assert_false(token_hash_equal(parsed.hash, hx));

    assert_int_equal(token_new_session(ADDR, s2, &other), 0);
    assert_string_not_equal(s, s2);
    assert_string_not_equal(made.hash, other.hash);
}

static void test_malformed_refused(void **state)
{
    (void)state;
    char s[TOKEN_SESSION_LEN + 2];
    token made, t;
    assert_int_equal(token_new_session(ADDR, s, &made), 0);
    char bad[TOKEN_SESSION_LEN + 2];

    assert_false(token_parse_session(s, TOKEN_SESSION_LEN - 1, &t)); /* short */
    memcpy(bad, s, TOKEN_SESSION_LEN);
    bad[TOKEN_SESSION_LEN] = 'a';
    assert_false(token_parse_session(bad, TOKEN_SESSION_LEN + 1, &t)); /* long */
    memcpy(bad, s, TOKEN_SESSION_LEN);
    bad[1] = 'k'; /* an API key's prefix */
    assert_false(token_parse_session(bad, TOKEN_SESSION_LEN, &t));
    memcpy(bad, s, TOKEN_SESSION_LEN);
    bad[10] = 'A'; /* uppercase: the token is issued lowercase and compared as bytes */
    assert_false(token_parse_session(bad, TOKEN_SESSION_LEN, &t));
    memcpy(bad, s, TOKEN_SESSION_LEN);
    bad[60] = 'g';
    assert_false(token_parse_session(bad, TOKEN_SESSION_LEN, &t));
    assert_false(token_parse_session("", 0, &t));
}

static void test_key_new_parses_back(void **state)
{
    (void)state;
    const char *eid = "c-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    char s[TOKEN_KEY_LEN + 1], s2[TOKEN_KEY_LEN + 1];
    api_key made, parsed, other;
    assert_int_equal(token_new_key(eid, s, &made), 0);
    assert_int_equal(strlen(s), TOKEN_KEY_LEN);
    assert_memory_equal(s, "ek_0f1e2d3c4b5a69788796a5b4c3d2e1f0", 35);
    assert_true(token_parse_key(s, strlen(s), &parsed));
    assert_string_equal(parsed.entity, eid);
    assert_string_equal(parsed.hash, made.hash);
    assert_string_equal(parsed.id, made.id);
    uint8_t h[32];
    char hx[65];
    keccak256(s, TOKEN_KEY_LEN, h);
    hex_encode(h, 32, hx);
    assert_string_equal(parsed.hash, hx);
    assert_int_equal(token_new_key(eid, s2, &other), 0);
    assert_string_not_equal(s, s2);
    /* Not a key: a session token, another length, uppercase, a bad entity id. */
    token t;
    char tok[TOKEN_SESSION_LEN + 1];
    uint8_t addr[20] = {0};
    assert_int_equal(token_new_session(addr, tok, &t), 0);
    assert_false(token_parse_key(tok, strlen(tok), &parsed));
    assert_false(token_parse_session(s, strlen(s), &t));
    assert_false(token_parse_key(s, TOKEN_KEY_LEN - 1, &parsed));
    s[5] = 'A';
    assert_false(token_parse_key(s, TOKEN_KEY_LEN, &parsed));
    assert_int_equal(token_new_key("c-0f1e2d3c-4b5a-6978-8796", s2, &other), -1);
    assert_int_equal(token_new_key("c-0f1e2d3c-4b5a-6978-8796-A5B4C3D2E1F0", s2, &other), -1);
    assert_int_equal(token_new_key("x-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", s2, &other), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_parses_back),
        cmocka_unit_test(test_malformed_refused),
        cmocka_unit_test(test_key_new_parses_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
