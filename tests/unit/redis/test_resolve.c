/* resolve: the "host:port[,host:port...]" lists of REDIS_CLUSTER_NODES and REDIS_SENTINELS. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "redis/resolve.h"

static void test_hosts_ports_and_ipv6_brackets(void **state)
{
    (void)state;
    resolve_endpoint out[4];
    assert_int_equal(resolve_parse_list("127.0.0.1:7000,redis-0.redis:6379,[::1]:7001", out, 4), 3);
    assert_string_equal(out[0].host, "127.0.0.1");
    assert_int_equal(out[0].port, 7000);
    assert_string_equal(out[1].host, "redis-0.redis");
    assert_int_equal(out[1].port, 6379);
    assert_string_equal(out[2].host, "::1");
    assert_int_equal(out[2].port, 7001);
    assert_int_equal(resolve_parse_list("h:1", out, 1), 1);
    assert_int_equal(resolve_parse_list("h:65535", out, 1), 1);
    assert_int_equal(out[0].port, 65535);
}

static void test_malformed_empty_and_too_many(void **state)
{
    (void)state;
    resolve_endpoint out[2];
    const char *bad[] = {"",      "h",        "h:",   ":6379", "h:0", "h:65536", "h:99999999999",
                         "h:63x", "h:1,,h:2", "[]:1", "h:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(resolve_parse_list(bad[i], out, 2), -1);
    assert_int_equal(resolve_parse_list("a:1,b:2,c:3", out, 2), -2);
    assert_int_equal(resolve_parse_list("h:1,", out, 2), 1); /* a trailing comma is no item */
    char longhost[RESOLVE_HOST_SIZE + 8];
    memset(longhost, 'h', RESOLVE_HOST_SIZE);
    memcpy(longhost + RESOLVE_HOST_SIZE, ":1", 3);
    assert_int_equal(resolve_parse_list(longhost, out, 2), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hosts_ports_and_ipv6_brackets),
        cmocka_unit_test(test_malformed_empty_and_too_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
