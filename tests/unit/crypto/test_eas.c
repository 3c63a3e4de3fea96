/* EIP-712 and EAS off-chain attestations against tests/fixtures/attest_vectors.json (made with
 * ethers and the EAS SDK by tests/node/gen_attest_vectors.cjs); the key file's checks. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <secp256k1.h>

#include "fixture.h"
#include "crypto/address.h"
#include "crypto/eas.h"
#include "crypto/keccak.h"
#include "crypto/keyfile.h"
#include "crypto/sig.h"

static json_t *g_fixture;
static secp256k1_context *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    return g_ctx ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    secp256k1_context_destroy(g_ctx);
    return 0;
}

static void assert_hex32(const uint8_t got[32], const char *want, const char *what,
                         const char *name)
{
    uint8_t w[32];
    fixture_hex_exact(want, w, 32);
    if (memcmp(got, w, 32) != 0) {
        char g[EAS_HEX32_SIZE];
        eas_hex32(got, g);
        fail_msg("%s of \"%s\": got %s, want %s", what, name, g, want);
    }
}

static uint64_t u64(const char *s)
{
    return strtoull(s, NULL, 10);
}

static void test_schema_uid(void **state)
{
    (void)state;
    const char *schema = fixture_str(g_fixture, "schema");
    assert_string_equal(schema, EAS_LEVEL_SCHEMA);
    uint8_t zero[20] = {0}, uid[32];
    eas_schema_uid(schema, strlen(schema), zero, true, uid);
    assert_hex32(uid, fixture_str(g_fixture, "schema_uid"), "schema uid", "schema");
    uint8_t th[32];
    keccak256(EAS_ATTEST_TYPE, strlen(EAS_ATTEST_TYPE), th);
    assert_hex32(th, fixture_str(g_fixture, "attest_type_hash"), "type hash", "Attest");
    assert_memory_equal(eas_attest_type_hash(), th, 32);
    static const char domain_type[] =
        "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)";
    keccak256(domain_type, strlen(domain_type), th);
    assert_memory_equal(eip712_domain_type_hash(), th, 32);
}

/* Every vector, end to end: data, domain, salt, struct hash, digest, UID and signature. */
static void test_vectors(void **state)
{
    (void)state;
    json_t *vs = fixture_array(g_fixture, "vectors"), *v;
    size_t i;
    assert_true(json_array_size(vs) >= 5);
    uint8_t schema[32], zero[20] = {0};
    eas_schema_uid(EAS_LEVEL_SCHEMA, strlen(EAS_LEVEL_SCHEMA), zero, true, schema);
    json_array_foreach(vs, i, v)
    {
        const char *name = fixture_str(v, "name");
        eas_level_fields f = {
            .entity_id = fixture_str(v, "entity_id"),
            .entity_name = fixture_str(v, "entity_name"),
            .level_id = fixture_str(v, "level_id"),
            .level_name = fixture_str(v, "level_name"),
            .reached_at = u64(fixture_str(v, "reached_at")),
        };
        f.entity_id_len = strlen(f.entity_id);
        f.entity_name_len = strlen(f.entity_name);
        f.level_id_len = strlen(f.level_id);
        f.level_name_len = strlen(f.level_name);
        size_t want_len;
        uint8_t *want = fixture_hex(fixture_str(v, "data"), &want_len);
        assert_int_equal(eas_level_data_size(&f), want_len);
        uint8_t *data = malloc(want_len);
        assert_non_null(data);
        assert_int_equal(eas_level_data(&f, data), want_len);
        if (memcmp(data, want, want_len) != 0)
            fail_msg("data of \"%s\" differs", name);

        uint64_t chain = u64(fixture_str(v, "chain_id"));
        const char *contract_s = fixture_str(v, "contract"), *ver = fixture_str(v, "eas_version");
        uint8_t contract[20], dom[32];
        assert_int_equal(address_parse(contract_s, strlen(contract_s), contract), ADDRESS_OK);
        eip712_domain_separator(EAS_DOMAIN_NAME, strlen(EAS_DOMAIN_NAME), ver, strlen(ver), chain,
                                contract, dom);
        assert_hex32(dom, fixture_str(v, "domain_separator"), "domain separator", name);

        uint8_t key[32];
        fixture_hex_exact(fixture_str(v, "key"), key, 32);
        eas_attest m = {
            .time = f.reached_at, .revocable = true, .data = data, .data_len = want_len};
        memcpy(m.schema, schema, 32);
        const char *rcp = fixture_str(v, "recipient");
        assert_int_equal(address_parse(rcp, strlen(rcp), m.recipient), ADDRESS_OK);
        uint8_t secret[32];
        eas_salt_secret(key, secret);
        eas_salt(secret, chain, contract, &m, m.salt);
        assert_hex32(m.salt, fixture_str(v, "salt"), "salt", name);

        uint8_t sh[32], digest[32], uid[32];
        eas_attest_struct_hash(&m, sh);
        assert_hex32(sh, fixture_str(v, "struct_hash"), "struct hash", name);
        eip712_digest(dom, sh, digest);
        assert_hex32(digest, fixture_str(v, "digest"), "digest", name);
        eas_offchain_uid(&m, uid);
        assert_hex32(uid, fixture_str(v, "uid"), "uid", name);
        /* the same with the data's hash given */
        uint8_t dh[32], sh2[32], salt2[32];
        keccak256(data, want_len, dh);
        m.data_hash = dh;
        eas_attest_struct_hash(&m, sh2);
        eas_salt(secret, chain, contract, &m, salt2);
        assert_memory_equal(sh2, sh, 32);
        assert_memory_equal(salt2, m.salt, 32);
        m.data_hash = NULL;

        eth_sig sig;
        assert_int_equal(sig_sign(g_ctx, key, digest, &sig), 0);
        assert_hex32(sig.r, fixture_str(v, "r"), "r", name);
        assert_hex32(sig.s, fixture_str(v, "s"), "s", name);
        assert_int_equal(27 + sig.recid, fixture_int(v, "v"));
        assert_true(sig.s[0] < 0x80); /* low s */
        free(data);
        free(want);
    }
}

static int parse(const char *text, uint8_t key[32])
{
    char err[200];
    return keyfile_parse(g_ctx, text, strlen(text), key, err, sizeof err);
}

static void test_keyfile_parse(void **state)
{
    (void)state;
    const char *hex = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318";
    uint8_t want[32], key[32];
    fixture_hex_exact(hex, want, 32);
    char text[200];
    const char *forms[][2] = {{"", ""}, {"0x", ""}, {"  0x", "\n"}, {"\n\t", "\r\n\n"}, {"0X", ""}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(text, sizeof text, "%s%s%s", forms[i][0], hex, forms[i][1]);
        memset(key, 0, 32);
        assert_int_equal(parse(text, key), 0);
        assert_memory_equal(key, want, 32);
    }
    /* upper-case digits */
    snprintf(text, sizeof text, "0x%s", hex);
    for (char *p = text + 2; *p; p++)
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 32);
    assert_int_equal(parse(text, key), 0);
    assert_memory_equal(key, want, 32);

    memset(key, 0x5a, 32);
    const char *bad[] = {
        "",
        "0x",
        "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f36231",   /* 63 */
        "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f3623180", /* 65 */
        "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f36231g",
        "4c0883a69102937d6231471b5dbb6204 fe5129617082792ae468d01a3f362318",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", /* n */
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse(bad[i], key) == 0)
            fail_msg("accepted \"%s\"", bad[i]);
        for (int j = 0; j < 32; j++)
            assert_int_equal(key[j], 0x5a);
    }
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_keyfile_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/entityd-keyfile-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], err[300];
    snprintf(path, sizeof path, "%s/key", dir);
    uint8_t key[32];
    const char *text = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318\n";

    write_file(path, text, 0600);
    assert_int_equal(keyfile_load(g_ctx, path, key, err, sizeof err), 0);
    write_file(path, text, 0400);
    assert_int_equal(keyfile_load(g_ctx, path, key, err, sizeof err), 0);

    const mode_t open_modes[] = {0644, 0640, 0604, 0660, 0606};
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        write_file(path, text, open_modes[i]);
        assert_int_equal(keyfile_load(g_ctx, path, key, err, sizeof err), -1);
        assert_non_null(strstr(err, "group or others"));
    }
    write_file(path, "0x1234\n", 0600);
    assert_int_equal(keyfile_load(g_ctx, path, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "64 hex digits"));
    assert_null(strstr(err, "1234")); /* the text is never quoted */
    unlink(path);
    assert_int_equal(keyfile_load(g_ctx, path, key, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot be opened"));
    rmdir(dir);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_uid),
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_keyfile_parse),
        cmocka_unit_test(test_keyfile_load),
    };
    g_fixture = fixture_load(argc, argv);
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    json_decref(g_fixture);
    return rc;
}
