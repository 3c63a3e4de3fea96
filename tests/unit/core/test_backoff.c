/* backoff: the waits double from the floor, stop at the ceiling, and start over on reset. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/backoff.h"

static void doubles_up_to_the_ceiling(void **state)
{
    (void)state;
    backoff b;
    backoff_init(&b, 50, 2000);
    const unsigned want[] = {50, 100, 200, 400, 800, 1600, 2000, 2000};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(backoff_next(&b), want[i]);
}

static void reset_starts_over(void **state)
{
    (void)state;
    backoff b;
    backoff_init(&b, 50, 10000);
    backoff_next(&b);
    backoff_next(&b);
    backoff_reset(&b);
    assert_int_equal(backoff_next(&b), 50);
    assert_int_equal(backoff_next(&b), 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(doubles_up_to_the_ceiling),
        cmocka_unit_test(reset_starts_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
