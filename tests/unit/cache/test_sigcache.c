/* sigcache: hits and misses by signature and epoch, a disabled cache, bounded eviction. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cache/sigcache.h"

/* A deterministic stream of signature-like bytes (xorshift64). */
static uint64_t g_rng = 0x243f6a8885a308d3ULL;

static uint64_t next_rand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void random_bytes(uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)(next_rand() >> 56);
}

/* The cache under test, freed by teardown also when an assertion cut the test short. */
static sigcache *g_cache;

static sigcache *new_cache(size_t entries)
{
    g_cache = sigcache_new(entries);
    assert_non_null(g_cache);
    return g_cache;
}

static int teardown(void **state)
{
    sigcache_free(g_cache);
    g_cache = NULL;
    return 0;
}

typedef struct sig_addr {
    uint8_t sig[65];
    uint8_t addr[20];
} sig_addr;

static void make(sig_addr *s)
{
    random_bytes(s->sig, sizeof s->sig);
    random_bytes(s->addr, sizeof s->addr);
}

static void test_put_then_get(void **state)
{
    sigcache *c = new_cache(16);
    sig_addr a;
    uint8_t got[20];

    make(&a);
    assert_false(sigcache_get(c, a.sig, 7, got));
    assert_int_equal(sigcache_hits(c), 0);
    sigcache_put(c, a.sig, 7, a.addr);
    memset(got, 0, sizeof got);
    assert_true(sigcache_get(c, a.sig, 7, got));
    assert_memory_equal(got, a.addr, 20);
    assert_true(sigcache_get(c, a.sig, 7, got));
    assert_int_equal(sigcache_hits(c), 2);
}

static void test_epoch_mismatch_misses(void **state)
{
    /* Four entries make one set: every epoch is looked up among the same slots. */
    sigcache *c = new_cache(4);
    sig_addr a;
    uint8_t got[20];

    make(&a);
    sigcache_put(c, a.sig, 100, a.addr);
    memset(got, 0xEE, sizeof got);
    assert_false(sigcache_get(c, a.sig, 101, got));
    assert_false(sigcache_get(c, a.sig, 99, got));
    assert_false(sigcache_get(c, a.sig, 0, got));
    assert_false(sigcache_get(c, a.sig, -100, got));
    /* A miss leaves the output alone. */
    for (int i = 0; i < 20; i++)
        assert_int_equal(got[i], 0xEE);
    assert_int_equal(sigcache_hits(c), 0);
    assert_true(sigcache_get(c, a.sig, 100, got));
}

static void test_same_sig_in_two_epochs(void **state)
{
    sigcache *c = new_cache(4); /* one set: both epochs share its slots */
    sig_addr a;
    uint8_t other[20], got[20];

    make(&a);
    random_bytes(other, sizeof other);
    sigcache_put(c, a.sig, 5, a.addr);
    sigcache_put(c, a.sig, 6, other);
    assert_true(sigcache_get(c, a.sig, 5, got));
    assert_memory_equal(got, a.addr, 20);
    assert_true(sigcache_get(c, a.sig, 6, got));
    assert_memory_equal(got, other, 20);
}

static void test_every_byte_of_the_signature_counts(void **state)
{
    sigcache *c = new_cache(64);
    sig_addr a;
    uint8_t got[20];

    make(&a);
    sigcache_put(c, a.sig, 1, a.addr);
    for (size_t i = 0; i < 65; i++) {
        uint8_t sig[65];
        memcpy(sig, a.sig, 65);
        sig[i] ^= 0x01;
        if (sigcache_get(c, sig, 1, got))
            fail_msg("a signature differing in byte %zu hits", i);
    }
    assert_true(sigcache_get(c, a.sig, 1, got));
}

static void test_put_again_replaces(void **state)
{
    sigcache *c = new_cache(4);
    sig_addr a;
    uint8_t other[20], got[20];

    make(&a);
    random_bytes(other, sizeof other);
    sigcache_put(c, a.sig, 3, a.addr);
    sigcache_put(c, a.sig, 3, other);
    assert_true(sigcache_get(c, a.sig, 3, got));
    assert_memory_equal(got, other, 20);

    /* Putting it again took no second slot: three more entries all fit beside it. */
    sig_addr more[3];
    for (int i = 0; i < 3; i++) {
        make(&more[i]);
        sigcache_put(c, more[i].sig, 3, more[i].addr);
    }
    assert_true(sigcache_get(c, a.sig, 3, got));
    for (int i = 0; i < 3; i++) {
        assert_true(sigcache_get(c, more[i].sig, 3, got));
        assert_memory_equal(got, more[i].addr, 20);
    }
}

static void test_size_zero_always_misses(void **state)
{
    sigcache *c = new_cache(0);
    sig_addr a;
    uint8_t got[20];

    make(&a);
    sigcache_put(c, a.sig, 1, a.addr);
    assert_false(sigcache_get(c, a.sig, 1, got));
    sigcache_put(c, a.sig, 1, a.addr);
    assert_false(sigcache_get(c, a.sig, 1, got));
    assert_int_equal(sigcache_hits(c), 0);
}

static void test_free_null(void **state)
{
    sigcache_free(NULL);
}

static void test_older_epoch_evicted_first(void **state)
{
    sigcache *c = new_cache(4);
    sig_addr old, cur[4];
    uint8_t got[20];

    make(&old);
    sigcache_put(c, old.sig, 1, old.addr);
    for (int i = 0; i < 4; i++) {
        make(&cur[i]);
        sigcache_put(c, cur[i].sig, 2, cur[i].addr);
    }
    /* Four entries of the current epoch fill a four-entry cache: the old one made room. */
    assert_false(sigcache_get(c, old.sig, 1, got));
    for (int i = 0; i < 4; i++) {
        if (!sigcache_get(c, cur[i].sig, 2, got))
            fail_msg("current-epoch entry %d was evicted before the old epoch's", i);
        assert_memory_equal(got, cur[i].addr, 20);
    }
}

static void test_bounded_under_many_inserts(void **state)
{
    enum { SIZE = 64, N = 20000 };
    static sig_addr all[N];
    sigcache *c = new_cache(SIZE);
    uint8_t got[20];

    for (int i = 0; i < N; i++) {
        make(&all[i]);
        sigcache_put(c, all[i].sig, 42, all[i].addr);
        /* The newest entry is always there, with its own address. */
        assert_true(sigcache_get(c, all[i].sig, 42, got));
        assert_memory_equal(got, all[i].addr, 20);
    }
    size_t found = 0;
    for (int i = 0; i < N; i++)
        if (sigcache_get(c, all[i].sig, 42, got)) {
            assert_memory_equal(got, all[i].addr, 20);
            found++;
        }
    /* "About SIZE": a power-of-two rounding at most doubles it. */
    assert_true(found > 0);
    if (found > 2 * SIZE)
        fail_msg("%zu of %d entries still cached by a cache of %d", found, N, SIZE);

    /* Still works for a new epoch afterwards. */
    sig_addr a;
    make(&a);
    sigcache_put(c, a.sig, 43, a.addr);
    assert_true(sigcache_get(c, a.sig, 43, got));
    assert_memory_equal(got, a.addr, 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_put_then_get, teardown),
        cmocka_unit_test_teardown(test_epoch_mismatch_misses, teardown),
        cmocka_unit_test_teardown(test_same_sig_in_two_epochs, teardown),
        cmocka_unit_test_teardown(test_every_byte_of_the_signature_counts, teardown),
        cmocka_unit_test_teardown(test_put_again_replaces, teardown),
        cmocka_unit_test_teardown(test_size_zero_always_misses, teardown),
        cmocka_unit_test(test_free_null),
        cmocka_unit_test_teardown(test_older_epoch_evicted_first, teardown),
        cmocka_unit_test_teardown(test_bounded_under_many_inserts, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
