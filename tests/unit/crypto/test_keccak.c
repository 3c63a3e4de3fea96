/* Keccak-256 against ethers' digests, one-shot and fed in awkward pieces. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "crypto/keccak.h"

static json_t *g_fixture;

/* The vector's input: stored hex, or pattern_length bytes with byte i = i % 251. */
static uint8_t *vector_input(const json_t *v, size_t *len)
{
    json_t *plen = json_object_get(v, "pattern_length");

    if (plen != NULL) {
        size_t n = (size_t)json_integer_value(plen);
        uint8_t *b = malloc(n + 1);
        assert_non_null(b);
        for (size_t i = 0; i < n; i++) {
            b[i] = (uint8_t)(i % 251);
        }
        *len = n;
        return b;
    }
    return fixture_hex(fixture_str(v, "hex"), len);
}

static void test_vectors_one_shot(void **state)
{
    json_t *vectors = fixture_array(g_fixture, "keccak"), *v;
    size_t i;

    assert_true(json_array_size(vectors) >= 10);
    json_array_foreach(vectors, i, v)
    {
        size_t len;
        uint8_t *in = vector_input(v, &len), expect[32], got[32];

        fixture_hex_exact(fixture_str(v, "digest"), expect, 32);
        keccak256(in, len, got);
        if (memcmp(expect, got, 32) != 0) {
            fail_msg("keccak vector '%s' differs", fixture_str(v, "name"));
        }
        free(in);
    }
}

/* Pieces of odd sizes cross the 136-byte block edges at many different offsets. */
static void test_vectors_incremental(void **state)
{
    static const size_t pieces[] = {1, 3, 7, 135, 136, 137, 13, 271, 2, 997};
    json_t *vectors = fixture_array(g_fixture, "keccak"), *v;
    size_t i;

    json_array_foreach(vectors, i, v)
    {
        size_t len;
        uint8_t *in = vector_input(v, &len), expect[32], got[32];
        struct keccak256_ctx ctx;

        fixture_hex_exact(fixture_str(v, "digest"), expect, 32);
        for (size_t start = 0; start < 4; start++) {
            size_t off = 0, k = start;

            keccak256_init(&ctx);
            while (off < len) {
                size_t n = pieces[k++ % (sizeof(pieces) / sizeof(pieces[0]))];
                if (n > len - off) {
                    n = len - off;
                }
                keccak256_update(&ctx, in + off, n);
                off += n;
            }
            keccak256_final(&ctx, got);
            if (memcmp(expect, got, 32) != 0) {
                fail_msg("keccak vector '%s' differs when split (start %zu)",
                         fixture_str(v, "name"), start);
            }
        }
        /* Byte by byte, for the inputs short enough to make that cheap. */
        if (len <= 4096) {
            keccak256_init(&ctx);
            for (size_t off = 0; off < len; off++) {
                keccak256_update(&ctx, in + off, 1);
            }
            keccak256_final(&ctx, got);
            assert_memory_equal(expect, got, 32);
        }
        free(in);
    }
}

static void test_empty_updates_and_reuse(void **state)
{
    static const uint8_t empty_digest[32] = {
        0xc5, 0xd2, 0x46, 0x01, 0x86, 0xf7, 0x23, 0x3c, 0x92, 0x7e, 0x7d,
        0xb2, 0xdc, 0xc7, 0x03, 0xc0, 0xe5, 0x00, 0xb6, 0x53, 0xca, 0x82,
        0x27, 0x3b, 0x7b, 0xfa, 0xd8, 0x04, 0x5d, 0x85, 0xa4, 0x70,
    };
    struct keccak256_ctx ctx;
    uint8_t got[32];

    keccak256_init(&ctx);
    keccak256_update(&ctx, NULL, 0);
    keccak256_update(&ctx, "", 0);
    keccak256_final(&ctx, got);
    assert_memory_equal(empty_digest, got, 32);
    /* final leaves ctx ready for a new hash. */
    keccak256_final(&ctx, got);
    assert_memory_equal(empty_digest, got, 32);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_one_shot),
        cmocka_unit_test(test_vectors_incremental),
        cmocka_unit_test(test_empty_updates_and_reuse),
    };
    int rc;

    g_fixture = fixture_load(argc, argv);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(g_fixture);
    return rc;
}
