/* addrguard: every special-purpose range refused, in every numeric spelling, and public
 * addresses let through. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "net/addrguard.h"

static const char *numeric(const char *host)
{
    const char *why = "unset";
    assert_true(addrguard_numeric_host(host, &why));
    return why;
}

static void test_refused_spellings(void **state)
{
    (void)state;
    static const char *const refused[] = {"127.0.0.1",
                                          "127.1",
                                          "0x7f.1",
                                          "0x7f000001",
                                          "017700000001",
                                          "2130706433",
                                          "0177.0.0.1",
                                          "127.0.0.1.",
                                          "0.0.0.0",
                                          "0",
                                          "10.1.2.3",
                                          "100.64.0.1",
                                          "100.127.255.255",
                                          "169.254.169.254",
                                          "172.16.0.1",
                                          "172.31.255.255",
                                          "192.168.1.1",
                                          "198.18.0.1",
                                          "198.19.255.255",
                                          "224.0.0.1",
                                          "239.255.255.250",
                                          "240.0.0.1",
                                          "255.255.255.255",
                                          "192.0.0.8",
                                          "192.0.2.1",
                                          "198.51.100.7",
                                          "203.0.113.9",
                                          "::",
                                          "[::1]",
                                          "::1",
                                          "::ffff:127.0.0.1",
                                          "[::ffff:7f00:1]",
                                          "::ffff:8.8.8.8",
                                          "::127.0.0.1",
                                          "64:ff9b::7f00:1",
                                          "64:ff9b::808:808",
                                          "64:ff9b:1::1",
                                          "fe80::1",
                                          "fc00::1",
                                          "fd12:3456::1",
                                          "ff02::1",
                                          "2001:db8::1",
                                          "2002:7f00:1::1",
                                          "2001::1",
                                          "fec0::1",
                                          "100::1",
                                          "::ffff:0:7f00:1",
                                          "4000::1",
                                          "3fff::1"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *why = numeric(refused[i]);
        if (!why)
            fail_msg("%s was let through", refused[i]);
    }
}

static void test_public_allowed(void **state)
{
    (void)state;
    static const char *const allowed[] = {
        "8.8.8.8",    "1.1.1.1",    "93.184.216.34",     "100.63.255.255",           "100.128.0.1",
        "172.32.0.1", "198.20.0.1", "[2606:4700::1111]", "2a00:1450:4001:80b::200e", "0x08080808",
        "134744072"};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        const char *why = numeric(allowed[i]);
        if (why)
            fail_msg("%s refused as %s", allowed[i], why);
    }
}

static void test_names_are_not_numeric(void **state)
{
    (void)state;
    const char *why = "unset";
    assert_false(addrguard_numeric_host("example.com", &why));
    assert_null(why);
    assert_false(addrguard_numeric_host("localhost", &why));
    assert_false(addrguard_numeric_host("1.2.3.4.example", &why));
    assert_false(addrguard_numeric_host("", &why));
}

static void test_sockaddr(void **state)
{
    (void)state;
    struct sockaddr_in in = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
    assert_string_equal(addrguard_sockaddr((struct sockaddr *)&in), "a loopback address");
    inet_pton(AF_INET, "8.8.4.4", &in.sin_addr);
    assert_null(addrguard_sockaddr((struct sockaddr *)&in));
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:10.0.0.1", &in6.sin6_addr);
    assert_string_equal(addrguard_sockaddr((struct sockaddr *)&in6), "an IPv4-mapped address");
    inet_pton(AF_INET6, "2606:4700::1111", &in6.sin6_addr);
    assert_null(addrguard_sockaddr((struct sockaddr *)&in6));
    struct sockaddr un = {.sa_family = AF_UNIX};
    assert_non_null(addrguard_sockaddr(&un));
    assert_non_null(addrguard_sockaddr(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_spellings),
        cmocka_unit_test(test_public_allowed),
        cmocka_unit_test(test_names_are_not_numeric),
        cmocka_unit_test(test_sockaddr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
