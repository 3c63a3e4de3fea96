/* lease: the table of write-budget leases: find, add up to its size and no further, remove and
 * reuse (also inside a shared bucket), leases never move; the charge size doubles for a busy
 * address up to the cap and halves for a quiet one; the cap is a sixteenth of the budget. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "auth/lease.h"

static void address(char out[LEASE_ADDRESS_SIZE], unsigned i)
{
    snprintf(out, LEASE_ADDRESS_SIZE, "0x%040x", i);
}

static void test_add_find_remove(void **state)
{
    (void)state;
    lease_table t;
    assert_int_equal(lease_table_init(&t, 5), 0);
    char a[8][LEASE_ADDRESS_SIZE];
    lease *l[8];
    for (unsigned i = 0; i < 8; i++)
        address(a[i], i);
    for (unsigned i = 0; i < 5; i++) {
        assert_null(lease_find(&t, a[i]));
        l[i] = lease_add(&t, a[i]);
        assert_non_null(l[i]);
        assert_int_equal(l[i]->size, 1);
        assert_int_equal(l[i]->units, 0);
    }
    assert_int_equal(t.count, 5);
    /* Full: a sixth address gets no lease, and the table does not grow. */
    assert_null(lease_add(&t, a[5]));
    assert_int_equal(t.count, 5);
    for (unsigned i = 0; i < 5; i++)
        assert_ptr_equal(lease_find(&t, a[i]), l[i]);
    /* 5 leases in 8 buckets: removing any one keeps every other reachable where it was. */
    l[2]->units = 7;
    lease_remove(&t, l[0]);
    lease_remove(&t, l[3]);
    assert_null(lease_find(&t, a[0]));
    assert_null(lease_find(&t, a[3]));
    for (unsigned i = 1; i < 5; i++)
        if (i != 3)
            assert_ptr_equal(lease_find(&t, a[i]), l[i]);
    assert_int_equal(lease_find(&t, a[2])->units, 7);
    /* Removed slots are reused, and the table is full again at five. */
    lease *n6 = lease_add(&t, a[6]);
    lease *n7 = lease_add(&t, a[7]);
    assert_non_null(n6);
    assert_non_null(n7);
    assert_true(n6 == l[0] || n6 == l[3]);
    assert_true(n7 == l[0] || n7 == l[3]);
    assert_null(lease_add(&t, a[5]));
    assert_ptr_equal(lease_find(&t, a[6]), n6);
    assert_ptr_equal(lease_find(&t, a[7]), n7);
    assert_int_equal(n6->units, 0);
    lease_table_deinit(&t);
}

static void test_many_in_one_bucket(void **state)
{
    (void)state;
    /* 64 leases in 64 buckets share chains (the birthday bound); removing from a chain's
     * middle and ends keeps the rest reachable. A table of one lease has one bucket. */
    lease_table t;
    assert_int_equal(lease_table_init(&t, 1), 0);
    assert_int_equal(t.nbuckets, 1);
    lease_table_deinit(&t);
    assert_int_equal(lease_table_init(&t, 64), 0);
    char a[64][LEASE_ADDRESS_SIZE];
    lease *l[64];
    for (unsigned i = 0; i < 64; i++) {
        address(a[i], i * 7919);
        l[i] = lease_add(&t, a[i]);
        assert_non_null(l[i]);
    }
    for (unsigned i = 0; i < 64; i += 3)
        lease_remove(&t, l[i]);
    for (unsigned i = 0; i < 64; i++)
        assert_ptr_equal(lease_find(&t, a[i]), i % 3 ? l[i] : NULL);
    lease_table_deinit(&t);
}

static void test_size(void **state)
{
    (void)state;
    lease_table t;
    assert_int_equal(lease_table_init(&t, 4), 0);
    lease *l = lease_add(&t, "0x00000000000000000000000000000000000000aa");
    const uint64_t hold = 400;
    /* First charge: one unit, as a write without a lease. */
    assert_int_equal(lease_next_size(l, 1000, hold, 7), 1);
    /* Used up within a quarter of the hold: twice as many each time, up to the cap. */
    assert_int_equal(lease_next_size(l, 1050, hold, 7), 2);
    assert_int_equal(lease_next_size(l, 1100, hold, 7), 4);
    assert_int_equal(lease_next_size(l, 1150, hold, 7), 7);
    assert_int_equal(lease_next_size(l, 1200, hold, 7), 7);
    /* Between a quarter of the hold and the hold: as it was. */
    assert_int_equal(lease_next_size(l, 1400, hold, 7), 7);
    /* Longer than the hold: half as many, down to one. */
    assert_int_equal(lease_next_size(l, 1900, hold, 7), 3);
    assert_int_equal(lease_next_size(l, 2400, hold, 7), 1);
    assert_int_equal(lease_next_size(l, 2900, hold, 7), 1);
    /* A cap of one: never more. */
    assert_int_equal(lease_next_size(l, 2910, hold, 1), 1);
    lease_table_deinit(&t);
}

static void test_cap(void **state)
{
    (void)state;
    assert_int_equal(lease_cap(1), 1);
    assert_int_equal(lease_cap(30), 1);
    assert_int_equal(lease_cap(64), 4);
    assert_int_equal(lease_cap(120), 7);
    assert_int_equal(lease_cap(60000000), LEASE_MAX_UNITS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_find_remove),
        cmocka_unit_test(test_many_in_one_bucket),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
