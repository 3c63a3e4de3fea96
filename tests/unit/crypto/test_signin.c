/* The sign-in message against the text and nonce computed in JavaScript with node:crypto. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "crypto/signin.h"

static json_t *g_fixture;

static json_t *signin_section(const char *key)
{
    return fixture_array(json_object_get(g_fixture, "signin"), key);
}

static void test_epochs(void **state)
{
    json_t *cases = signin_section("epochs"), *v;
    size_t i;

    assert_true(json_array_size(cases) >= 5);
    json_array_foreach(cases, i, v)
    {
        int64_t got = signin_epoch(fixture_int(v, "unix_seconds"), fixture_int(v, "epoch_seconds"));
        assert_int_equal(got, fixture_int(v, "epoch"));
    }
    assert_int_equal(signin_epoch(12345, 0), 0);
    assert_int_equal(signin_epoch(INT64_MIN, 86400), INT64_MIN / 86400 - 1);
    assert_int_equal(signin_epoch(INT64_MAX, 1), INT64_MAX);
}

static void test_nonce_and_message(void **state)
{
    json_t *cases = signin_section("messages"), *v;
    size_t i;

    assert_true(json_array_size(cases) >= 3);
    json_array_foreach(cases, i, v)
    {
        size_t secret_len;
        uint8_t *secret = fixture_hex(fixture_str(v, "secret_hex"), &secret_len);
        const char *domain = fixture_str(v, "domain"), *expect = fixture_str(v, "message");
        int64_t epoch_seconds = fixture_int(v, "epoch_seconds"), epoch = fixture_int(v, "epoch");
        char nonce[SIGNIN_NONCE_SIZE];
        size_t cap = strlen(domain) + SIGNIN_MESSAGE_EXTRA, n;
        char *buf = malloc(cap);

        assert_non_null(buf);
        assert_int_equal(signin_epoch(fixture_int(v, "unix_seconds"), epoch_seconds), epoch);
        signin_nonce(secret, secret_len, epoch, nonce);
        assert_string_equal(nonce, fixture_str(v, "nonce"));

        n = signin_message(domain, secret, secret_len, epoch_seconds, epoch, buf, cap);
        assert_int_equal(n, strlen(expect));
        if (memcmp(buf, expect, n + 1) != 0) {
            fail_msg("sign-in message differs:\n%s\n--- expected ---\n%s", buf, expect);
        }
        assert_non_null(strstr(buf, fixture_str(v, "issued_at")));
        assert_non_null(strstr(buf, fixture_str(v, "expires_at")));

        /* Exactly enough room (the NUL included) works; one byte less reports failure. */
        assert_int_equal(
            signin_message(domain, secret, secret_len, epoch_seconds, epoch, buf, n + 1), n);
        assert_int_equal(signin_message(domain, secret, secret_len, epoch_seconds, epoch, buf, n),
                         0);
        assert_int_equal(signin_message(domain, secret, secret_len, epoch_seconds, epoch, NULL, 0),
                         0);
        free(buf);
        free(secret);
    }
}

static void test_nonce_depends_on_secret_and_epoch(void **state)
{
    char a[SIGNIN_NONCE_SIZE], b[SIGNIN_NONCE_SIZE], c[SIGNIN_NONCE_SIZE];

    signin_nonce((const uint8_t *)"k1", 2, 7, a);
    signin_nonce((const uint8_t *)"k2", 2, 7, b);
    signin_nonce((const uint8_t *)"k1", 2, 8, c);
    assert_int_equal(strlen(a), 32);
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, c);
}

static void test_huge_epoch_does_not_overflow(void **state)
{
    char buf[512];

    /* Saturates at year 9999 instead of overflowing (UBSan would flag an overflow). */
    assert_true(signin_message("d", (const uint8_t *)"k", 1, 86400, INT64_MAX, buf, sizeof(buf)) >
                0);
    assert_non_null(strstr(buf, "Issued At: 9999-12-31T23:59:59.999Z"));
    assert_true(signin_message("d", (const uint8_t *)"k", 1, INT64_MAX, -3, buf, sizeof(buf)) > 0);
    assert_non_null(strstr(buf, "Issued At: 0000-01-01T00:00:00.000Z"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epochs),
        cmocka_unit_test(test_nonce_and_message),
        cmocka_unit_test(test_nonce_depends_on_secret_and_epoch),
        cmocka_unit_test(test_huge_epoch_does_not_overflow),
    };
    int rc;

    g_fixture = fixture_load(argc, argv);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(g_fixture);
    return rc;
}
