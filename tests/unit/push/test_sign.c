/* sign: the Standard Webhooks signature against the specification's example (as the
 * `standardwebhooks` npm package computes it), a rotated secret's second signature while it
 * is valid and not after, and secrets that are not whsec_ texts. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "push/sign.h"

#define ID     "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define BODY   "{\"test\": 2432232314}"
#define TS     1614265330
#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SIG    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
#define OLD    "whsec_YW5vdGhlciBzZWNyZXQgb2YgMzIgYnl0ZXMuLi4uLi4="
#define OLDSIG "v1,Ye+CQTrODYivyQ8JG8/lYiIeBiwBPMsWfYGDVLiknfc="

static const char *header(buf *b, const char *secrets, int64_t now_ms)
{
    buf_reset(b, 0);
    if (sign_header(b, secrets, strlen(secrets), now_ms, ID, strlen(ID), TS, BODY, strlen(BODY)) !=
        0)
        return NULL;
    return buf_cstr(b);
}

static void test_specification_example(void **state)
{
    (void)state;
    buf b = {0};
    assert_string_equal(header(&b, SECRET, 0), SIG);
    buf_free(&b);
}

static void test_rotation_signs_twice_until_the_end(void **state)
{
    (void)state;
    buf b = {0};
    assert_string_equal(header(&b, SECRET " " OLD " 5000", 4999), SIG " " OLDSIG);
    assert_string_equal(header(&b, SECRET " " OLD " 5000", 5000), SIG);
    buf_free(&b);
}

static void test_refuses_what_is_no_secret(void **state)
{
    (void)state;
    buf b = {0};
    assert_null(header(&b, "", 0));
    assert_null(header(&b, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 0));
    assert_null(header(&b, "whsec_", 0));
    assert_null(header(&b, "whsec_!!!notbase64", 0));
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_specification_example),
        cmocka_unit_test(test_rotation_signs_twice_until_the_end),
        cmocka_unit_test(test_refuses_what_is_no_secret),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
