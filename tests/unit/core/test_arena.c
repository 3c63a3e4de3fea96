/* arena: zeroed, aligned, non-overlapping allocations released in one go. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/arena.h"

static int setup(void **state)
{
    static arena a;

    a = (arena)ARENA_INIT;
    *state = &a;
    return 0;
}

static int teardown(void **state)
{
    arena_reset(*state);
    return 0;
}

static void assert_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            fail_msg("byte %zu of %zu is 0x%02x, not 0", i, n, p[i]);
}

static void assert_aligned(const void *p)
{
    assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
}

static void test_alloc_zeroed_and_aligned(void **state)
{
    arena *a = *state;
    static const size_t sizes[] = {1, 3, 8, 15, 16, 17, 100, 1000};

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = arena_alloc(a, sizes[i]);
        assert_non_null(p);
        assert_aligned(p);
        assert_zero(p, sizes[i]);
        memset(p, 0xAB, sizes[i]); /* dirty it: later blocks must still come back zeroed */
    }
}

static void test_zeroed_after_reuse(void **state)
{
    arena *a = *state;

    for (int round = 0; round < 3; round++) {
        unsigned char *p = arena_alloc(a, 3000);
        assert_non_null(p);
        assert_zero(p, 3000);
        memset(p, 0xFF, 3000);
        arena_reset(a);
        assert_null(a->head);
    }
}

static void test_blocks_do_not_overlap(void **state)
{
    arena *a = *state;
    enum { N = 2000 };
    uint32_t *ptrs[N];

    /* Many small blocks over several chunks, each filled with its own index. */
    for (uint32_t i = 0; i < N; i++) {
        size_t words = 1 + i % 7;
        ptrs[i] = arena_alloc(a, words * sizeof(uint32_t));
        assert_non_null(ptrs[i]);
        for (size_t w = 0; w < words; w++)
            ptrs[i][w] = i;
    }
    for (uint32_t i = 0; i < N; i++)
        for (size_t w = 0; w < 1 + i % 7; w++)
            if (ptrs[i][w] != i)
                fail_msg("block %u word %zu was overwritten with %u", i, w, ptrs[i][w]);
}

static void test_large_blocks(void **state)
{
    arena *a = *state;

    unsigned char *small = arena_alloc(a, 10);
    unsigned char *big = arena_alloc(a, 100000);
    unsigned char *small2 = arena_alloc(a, 10);

    assert_non_null(small);
    assert_non_null(big);
    assert_non_null(small2);
    assert_aligned(big);
    assert_zero(big, 100000);
    memset(big, 0x5A, 100000);
    memset(small, 1, 10);
    memset(small2, 2, 10);
    assert_int_equal(big[0], 0x5A);
    assert_int_equal(big[99999], 0x5A);
    assert_int_equal(small[9], 1);
}

static void test_strndup(void **state)
{
    arena *a = *state;

    char *s = arena_strndup(a, "hello world", 5);
    assert_non_null(s);
    assert_string_equal(s, "hello");

    char *e = arena_strndup(a, "ignored", 0);
    assert_non_null(e);
    assert_string_equal(e, "");

    /* The copy is independent of its source. */
    char src[] = "abc";
    char *c = arena_strndup(a, src, 3);
    src[0] = 'X';
    assert_string_equal(c, "abc");
    assert_ptr_not_equal(c, src);
    assert_string_equal(s, "hello");
}

static void test_reset_empty_and_twice(void **state)
{
    arena *a = *state;

    arena_reset(a);
    arena_reset(a);
    assert_null(a->head);
    assert_non_null(arena_alloc(a, 1));
    assert_non_null(a->head);
    arena_reset(a);
    arena_reset(a);
    assert_null(a->head);
}

static void test_alloc_overflow_fails(void **state)
{
    arena *a = *state;

    /* No arena can hand out SIZE_MAX bytes: rounding the size up must not wrap it to 0. */
    assert_non_null(arena_alloc(a, 1));
    assert_null(arena_alloc(a, SIZE_MAX));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alloc_zeroed_and_aligned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zeroed_after_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocks_do_not_overlap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strndup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_empty_and_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_overflow_fails, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
