/* Signature parsing, EIP-191 hashing, recovery and signing against ethers' vectors. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <secp256k1.h>

#include "fixture.h"
#include "crypto/sig.h"

static json_t *g_fixture;
static secp256k1_context *g_ctx;

static const char curve_n_hex[] =
    "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";
static const char half_n_hex[] = "7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0";
static const char half_n_plus_1_hex[] =
    "7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a1";

static int parse_str(const char *s, eth_sig *out)
{
    return sig_parse(s, strlen(s), out);
}

/* "0x" + r + s + v, each given as hex without prefix. */
static void compose(char *out, size_t cap, const char *r, const char *s, const char *v)
{
    int n = snprintf(out, cap, "0x%s%s%s", r, s, v);
    assert_true(n > 0 && (size_t)n < cap);
}

static void assert_untouched_on_error(const char *s, int expect)
{
    eth_sig out;

    memset(&out, 0x5a, sizeof(out));
    int rc = parse_str(s, &out);
    if (rc != expect) {
        fail_msg("sig_parse(\"%s\") = %d, expected %d", s, rc, expect);
    }
    for (size_t i = 0; i < sizeof(out); i++) {
        assert_int_equal(((const uint8_t *)&out)[i], 0x5a);
    }
}

static void test_fixture_matches_curve_order(void **state)
{
    assert_string_equal(fixture_str(g_fixture, "secp256k1_n"), curve_n_hex);
}

static void test_vectors_parse_all_spellings(void **state)
{
    json_t *sigs = fixture_array(g_fixture, "signatures"), *v;
    size_t i;

    assert_true(json_array_size(sigs) >= 24);
    json_array_foreach(sigs, i, v)
    {
        const char *spellings[3] = {fixture_str(v, "signature"), fixture_str(v, "signature_v01"),
                                    fixture_str(v, "compact")};
        uint8_t r[32], s[32];
        int recid = (int)fixture_int(v, "v") - 27;

        fixture_hex_exact(fixture_str(v, "r"), r, 32);
        fixture_hex_exact(fixture_str(v, "s"), s, 32);
        for (int k = 0; k < 3; k++) {
            char upper[SIG_STRING_SIZE];
            eth_sig sig;

            assert_int_equal(parse_str(spellings[k], &sig), SIG_OK);
            assert_memory_equal(sig.r, r, 32);
            assert_memory_equal(sig.s, s, 32);
            assert_int_equal(sig.recid, recid);
            /* Without the 0x prefix, and with uppercase digits. */
            assert_int_equal(parse_str(spellings[k] + 2, &sig), SIG_OK);
            assert_memory_equal(sig.s, s, 32);
            strcpy(upper, spellings[k]);
            for (char *p = upper + 2; *p; p++) {
                if (*p >= 'a' && *p <= 'f') {
                    *p = (char)(*p - 'a' + 'A');
                }
            }
            assert_int_equal(parse_str(upper, &sig), SIG_OK);
            assert_int_equal(sig.recid, recid);
        }
    }
}

static void test_vectors_hash_and_recover(void **state)
{
    json_t *sigs = fixture_array(g_fixture, "signatures"), *v;
    size_t i;

    json_array_foreach(sigs, i, v)
    {
        size_t len;
        uint8_t *msg = fixture_hex(fixture_str(v, "message_hex"), &len);
        uint8_t expect_hash[32], hash[32], expect_addr[20], addr[20];
        json_t *text = json_object_get(v, "message");
        eth_sig sig;

        fixture_hex_exact(fixture_str(v, "hash"), expect_hash, 32);
        fixture_hex_exact(fixture_str(v, "address"), expect_addr, 20);
        if (json_is_string(text)) {
            assert_int_equal(json_string_length(text), len);
            assert_memory_equal(json_string_value(text), msg, len);
        }
        sig_personal_hash(msg, len, hash);
        if (memcmp(hash, expect_hash, 32) != 0) {
            fail_msg("personal hash of '%s' differs", fixture_str(v, "name"));
        }
        assert_int_equal(parse_str(fixture_str(v, "signature"), &sig), SIG_OK);
        memset(addr, 0, sizeof(addr));
        assert_int_equal(sig_recover(g_ctx, &sig, hash, addr), 0);
        if (memcmp(addr, expect_addr, 20) != 0) {
            fail_msg("recovered address of '%s' differs", fixture_str(v, "name"));
        }
        assert_int_equal(parse_str(fixture_str(v, "compact"), &sig), SIG_OK);
        assert_int_equal(sig_recover(g_ctx, &sig, hash, addr), 0);
        assert_memory_equal(addr, expect_addr, 20);

        /* The other parity names another key (or none): recovery must not ignore recid. */
        sig.recid ^= 1;
        memset(addr, 0, sizeof(addr));
        if (sig_recover(g_ctx, &sig, hash, addr) == 0) {
            assert_memory_not_equal(addr, expect_addr, 20);
        }
        free(msg);
    }
}

static void test_vectors_sign_matches_ethers(void **state)
{
    json_t *sigs = fixture_array(g_fixture, "signatures"), *v;
    size_t i;

    json_array_foreach(sigs, i, v)
    {
        uint8_t key[32], hash[32];
        char full[SIG_STRING_SIZE], compact[SIG_COMPACT_STRING_SIZE];
        eth_sig sig;

        fixture_hex_exact(fixture_str(v, "private_key"), key, 32);
        fixture_hex_exact(fixture_str(v, "hash"), hash, 32);
        assert_int_equal(sig_sign(g_ctx, key, hash, &sig), 0);
        sig_format(&sig, full);
        sig_format_compact(&sig, compact);
        if (strcmp(full, fixture_str(v, "signature")) != 0) {
            fail_msg("signature of '%s': got %s", fixture_str(v, "name"), full);
        }
        assert_string_equal(compact, fixture_str(v, "compact"));
    }
}

static void test_revocation_id_same_for_all_spellings(void **state)
{
    json_t *sigs = fixture_array(g_fixture, "signatures"), *v;
    size_t i;

    json_array_foreach(sigs, i, v)
    {
        const char *spellings[3] = {fixture_str(v, "signature"), fixture_str(v, "signature_v01"),
                                    fixture_str(v, "compact")};
        char expect[SIG_REVOCATION_ID_SIZE + 2], id[SIG_REVOCATION_ID_SIZE];

        compose(expect, sizeof(expect), fixture_str(v, "r") + 2, fixture_str(v, "s") + 2, "");
        for (int k = 0; k < 3; k++) {
            eth_sig sig;

            assert_int_equal(parse_str(spellings[k], &sig), SIG_OK);
            sig_revocation_id(&sig, id);
            assert_string_equal(id, expect + 2);
        }
    }
}

/* n - s over big-endian 32-byte numbers, s < n. */
static void order_minus(const uint8_t s[32], uint8_t out[32])
{
    uint8_t n[32];
    int borrow = 0;

    fixture_hex_exact(curve_n_hex, n, 32);
    for (int i = 31; i >= 0; i--) {
        int d = n[i] - s[i] - borrow;
        borrow = d < 0;
        out[i] = (uint8_t)(d + (borrow ? 256 : 0));
    }
    assert_int_equal(borrow, 0);
}

static void test_high_s_rejected(void **state)
{
    json_t *sigs = fixture_array(g_fixture, "signatures"), *v;
    size_t i;

    json_array_foreach(sigs, i, v)
    {
        const char *high = fixture_str(v, "signature_high_s");
        uint8_t s[32], hs[32];
        char hs_hex[65], mine[SIG_STRING_SIZE];
        eth_sig sig;

        /* Cross-check the fixture's n - s with an independent subtraction. */
        fixture_hex_exact(fixture_str(v, "s"), s, 32);
        order_minus(s, hs);
        for (int k = 0; k < 32; k++) {
            snprintf(hs_hex + 2 * k, 3, "%02x", hs[k]);
        }
        compose(mine, sizeof(mine), fixture_str(v, "r") + 2, hs_hex,
                fixture_int(v, "v") == 27 ? "1c" : "1b");
        assert_string_equal(mine, high);

        assert_untouched_on_error(high, SIG_EHIGHS);
        /* Same with v 0/1. */
        mine[130] = '0';
        mine[131] = fixture_int(v, "v") == 27 ? '1' : '0';
        assert_untouched_on_error(mine, SIG_EHIGHS);

        /* An eth_sig built by hand bypasses sig_parse; recovery still refuses high-s. */
        uint8_t hash[32], addr[20];
        assert_int_equal(parse_str(fixture_str(v, "signature"), &sig), SIG_OK);
        memcpy(sig.s, hs, 32);
        sig.recid ^= 1;
        fixture_hex_exact(fixture_str(v, "hash"), hash, 32);
        assert_int_equal(sig_recover(g_ctx, &sig, hash, addr), -1);
    }
}

static void test_range_rejections(void **state)
{
    json_t *v = json_array_get(fixture_array(g_fixture, "signatures"), 0);
    const char *r = fixture_str(v, "r") + 2, *s = fixture_str(v, "s") + 2;
    const char *zero = "0000000000000000000000000000000000000000000000000000000000000000";
    const char *all_f = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    const char *n_minus_1 = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140";
    char buf[SIG_STRING_SIZE + 8];
    eth_sig sig;

    compose(buf, sizeof(buf), zero, s, "1b");
    assert_untouched_on_error(buf, SIG_ERANGE);
    compose(buf, sizeof(buf), r, zero, "1b");
    assert_untouched_on_error(buf, SIG_ERANGE);
    compose(buf, sizeof(buf), curve_n_hex, s, "1b");
    assert_untouched_on_error(buf, SIG_ERANGE);
    compose(buf, sizeof(buf), all_f, s, "1b");
    assert_untouched_on_error(buf, SIG_ERANGE);
    compose(buf, sizeof(buf), r, curve_n_hex, "1b");
    assert_untouched_on_error(buf, SIG_ERANGE);
    compose(buf, sizeof(buf), r, all_f, "1c");
    assert_untouched_on_error(buf, SIG_ERANGE);

    /* The edges that are allowed: r = n - 1 and s = n/2. */
    compose(buf, sizeof(buf), n_minus_1, s, "1b");
    assert_int_equal(parse_str(buf, &sig), SIG_OK);
    compose(buf, sizeof(buf), r, half_n_hex, "1b");
    assert_int_equal(parse_str(buf, &sig), SIG_OK);
    compose(buf, sizeof(buf), r, half_n_plus_1_hex, "1b");
    assert_untouched_on_error(buf, SIG_EHIGHS);

    /* Compact: s = 0 with parity 1, and a high s below 2^255. */
    compose(buf, sizeof(buf), r, "8000000000000000000000000000000000000000000000000000000000000000",
            "");
    assert_untouched_on_error(buf, SIG_ERANGE);
    compose(buf, sizeof(buf), r, half_n_plus_1_hex, "");
    assert_untouched_on_error(buf, SIG_EHIGHS);
    compose(buf, sizeof(buf), zero, s, "");
    assert_untouched_on_error(buf, SIG_ERANGE);
}

static void test_length_rejections(void **state)
{
    const char *sig =
        fixture_str(json_array_get(fixture_array(g_fixture, "signatures"), 0), "signature");
    static const size_t lengths[] = {0, 1, 64, 126, 127, 129, 131, 132, 260};
    char buf[300];

    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        size_t n = lengths[i];

        for (size_t k = 0; k < n; k++) {
            buf[k] = sig[2 + k % 130];
        }
        buf[n] = '\0';
        assert_untouched_on_error(buf, SIG_ELENGTH);
        memmove(buf + 2, buf, n + 1);
        buf[0] = '0';
        buf[1] = 'x';
        assert_untouched_on_error(buf, SIG_ELENGTH);
    }
    assert_untouched_on_error("0x", SIG_ELENGTH);
    /* The length argument bounds the parse: a prefix of a valid signature is too short. */
    eth_sig out;
    assert_int_equal(sig_parse(sig, 131, &out), SIG_ELENGTH);
}

static void test_hex_and_prefix_rejections(void **state)
{
    json_t *v = json_array_get(fixture_array(g_fixture, "signatures"), 0);
    const char *full = fixture_str(v, "signature"), *compact = fixture_str(v, "compact");
    static const char bad_chars[] = {'g', 'G', ' ', 'x', '-', '\n'};
    static const size_t positions[] = {2, 10, 65, 66, 129, 131};
    char buf[SIG_STRING_SIZE];

    for (size_t c = 0; c < sizeof(bad_chars); c++) {
        for (size_t p = 0; p < sizeof(positions) / sizeof(positions[0]); p++) {
            strcpy(buf, full);
            buf[positions[p]] = bad_chars[c];
            assert_untouched_on_error(buf, SIG_EHEX);
            if (positions[p] < 130) {
                strcpy(buf, compact);
                buf[positions[p]] = bad_chars[c];
                assert_untouched_on_error(buf, SIG_EHEX);
            }
        }
    }
    /* A compact signature with a wrong prefix has 130 characters, none of which may be junk. */
    static const char *const prefixes[] = {"0X", "1x", "x0", "0h", "\\x"};
    for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
        strcpy(buf, compact);
        memcpy(buf, prefixes[p], 2);
        assert_untouched_on_error(buf, SIG_EHEX);
    }
    /* An embedded NUL inside the stated length is junk too. */
    eth_sig out;
    strcpy(buf, full);
    buf[40] = '\0';
    assert_int_equal(sig_parse(buf, 132, &out), SIG_EHEX);
}

static void test_v_rejections(void **state)
{
    json_t *v = json_array_get(fixture_array(g_fixture, "signatures"), 0);
    const char *r = fixture_str(v, "r") + 2, *s = fixture_str(v, "s") + 2;
    static const char *const bad_v[] = {"02", "03", "1a", "1d", "1e", "25", "26", "ff", "80"};
    static const char *const good_v[] = {"00", "01", "1b", "1c"};
    char buf[SIG_STRING_SIZE];
    eth_sig sig;

    for (size_t i = 0; i < sizeof(bad_v) / sizeof(bad_v[0]); i++) {
        compose(buf, sizeof(buf), r, s, bad_v[i]);
        assert_untouched_on_error(buf, SIG_EV);
    }
    for (size_t i = 0; i < sizeof(good_v) / sizeof(good_v[0]); i++) {
        compose(buf, sizeof(buf), r, s, good_v[i]);
        assert_int_equal(parse_str(buf, &sig), SIG_OK);
        assert_int_equal(sig.recid, (int)(i % 2));
    }
}

static void test_strerror(void **state)
{
    const int codes[] = {SIG_OK, SIG_EHEX, SIG_ELENGTH, SIG_EV, SIG_ERANGE, SIG_EHIGHS};
    const size_t ncodes = sizeof(codes) / sizeof(codes[0]);

    for (size_t i = 0; i < ncodes; i++) {
        const char *m = sig_strerror(codes[i]);
        assert_non_null(m);
        assert_true(strlen(m) > 10);
        assert_int_equal(m[strlen(m) - 1], '.');
        for (size_t k = 0; k < i; k++) {
            assert_string_not_equal(m, sig_strerror(codes[k]));
        }
    }
    assert_non_null(sig_strerror(-1));
    assert_non_null(sig_strerror(1000));
}

static void test_sign_rejects_invalid_keys(void **state)
{
    uint8_t key[32], hash[32] = {1};
    eth_sig sig;

    memset(key, 0, sizeof(key));
    assert_int_equal(sig_sign(g_ctx, key, hash, &sig), -1);
    fixture_hex_exact(curve_n_hex, key, 32);
    assert_int_equal(sig_sign(g_ctx, key, hash, &sig), -1);
}

static void test_personal_hash_known_value(void **state)
{
    /* hashMessage("hello"), computed once with ethers and pinned here, so this check does not
     * rest on the fixture file alone. */
    static const char expect[] = "50b2c43fd39106bafbba0da34fc430e1f91e3c96ea2acee2bc34119f92b37750";
    uint8_t hash[32], want[32];

    fixture_hex_exact(expect, want, 32);
    sig_personal_hash("hello", 5, hash);
    assert_memory_equal(hash, want, 32);
}

static int setup(void **state)
{
    g_ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    return g_ctx == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    secp256k1_context_destroy(g_ctx);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_matches_curve_order),
        cmocka_unit_test(test_vectors_parse_all_spellings),
        cmocka_unit_test(test_vectors_hash_and_recover),
        cmocka_unit_test(test_vectors_sign_matches_ethers),
        cmocka_unit_test(test_revocation_id_same_for_all_spellings),
        cmocka_unit_test(test_high_s_rejected),
        cmocka_unit_test(test_range_rejections),
        cmocka_unit_test(test_length_rejections),
        cmocka_unit_test(test_hex_and_prefix_rejections),
        cmocka_unit_test(test_v_rejections),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_sign_rejects_invalid_keys),
        cmocka_unit_test(test_personal_hash_known_value),
    };
    int rc;

    g_fixture = fixture_load(argc, argv);
    rc = cmocka_run_group_tests(tests, setup, teardown);
    json_decref(g_fixture);
    return rc;
}
