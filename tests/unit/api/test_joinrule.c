/* joinrule: rules of every kind parsed and rendered back in the contract's form; each refusal
 * naming its field path; the limits (32 leaves, depth 4, atLeast's range, uint256); and the
 * three-valued judgement of each combinator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/joinrule.h"

static bool chains_1_and_137(void *ctx, uint64_t chain)
{
    (void)ctx;
    return chain == 1 || chain == 137;
}

static joinrule rule;

static int parse(const char *text, verr *e)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    assert_non_null(v);
    memset(e, 0, sizeof *e);
    int rc = joinrule_parse(v, chains_1_and_137, NULL, &rule, e);
    json_decref(v);
    return rc;
}

static void round_trip(const char *text)
{
    verr e;
    assert_int_equal(parse(text, &e), 0);
    char *out = joinrule_render(&rule);
    assert_non_null(out);
    assert_string_equal(out, text);
    free(out);
}

static void refused(const char *text, const char *field)
{
    verr e;
    assert_int_equal(parse(text, &e), -1);
    assert_string_equal(e.field, field);
    assert_true(strncmp(e.message, field, strlen(field)) == 0);
}

#define C "0x00000000000000000000000000000000000000aa"
#define E "c-7f0e3b0a-1b2c-4d3e-8f40-5a6b7c8d9e0f"

static void test_every_kind_round_trips(void **state)
{
    (void)state;
    round_trip("{\"erc20\":{\"chainId\":1,\"contract\":\"" C "\",\"min\":\"1000\"}}");
    round_trip("{\"erc721\":{\"chainId\":137,\"contract\":\"" C "\"}}");
    round_trip("{\"erc721\":{\"chainId\":1,\"contract\":\"" C "\",\"tokenId\":\"7\"}}");
    round_trip("{\"erc1155\":{\"chainId\":1,\"contract\":\"" C
               "\",\"tokenId\":\"0\",\"min\":\"2\"}}");
    round_trip(
        "{\"native\":{\"chainId\":1,\"min\":"
        "\"115792089237316195423570985008687907853269984665640564039457584007913129639935\"}}");
    round_trip("{\"level\":{\"entityID\":\"" E "\",\"lvID\":\"gold-1\"}}");
    round_trip("{\"role\":{\"entityID\":\"" E "\",\"role\":\"admin\"}}");
    round_trip("{\"all\":[{\"any\":[{\"not\":{\"role\":{\"entityID\":\"" E
               "\",\"role\":\"member\"}}},{\"native\":{\"chainId\":1,\"min\":\"0\"}}]},"
               "{\"atLeast\":1,\"of\":[{\"level\":{\"entityID\":\"" E "\",\"lvID\":\"a\"}}]}]}");
    assert_int_equal(rule.leaves, 3);
    /* leaves numbered in the rule's order, children after their parents */
    assert_int_equal(rule.node[rule.leaf_node[0]].kind, JR_ROLE);
    assert_int_equal(rule.node[rule.leaf_node[1]].kind, JR_NATIVE);
    assert_int_equal(rule.node[rule.leaf_node[2]].kind, JR_LEVEL);
    for (int i = 1; i < rule.nodes; i++)
        assert_true(rule.node[i].parent < i);
    /* a contract address is stored lowercase */
    verr e;
    assert_int_equal(parse("{\"erc20\":{\"chainId\":1,\"contract\":"
                           "\"0x00000000000000000000000000000000000000AA\",\"min\":\"1\"}}",
                           &e),
                     0);
    assert_string_equal(rule.node[0].contract, C);
}

static void test_refusals_name_their_field(void **state)
{
    (void)state;
    refused("{\"all\":[{\"native\":{\"chainId\":1,\"min\":\"1\"}},"
            "{\"native\":{\"chainId\":1,\"min\":\"1\"}},"
            "{\"erc20\":{\"chainId\":1,\"contract\":\"" C "\",\"min\":\"-5\"}}]}",
            "rule.all[2].erc20.min");
    refused("{\"erc20\":{\"chainId\":1,\"contract\":\"" C "\",\"min\":\"007\"}}", "rule.erc20.min");
    refused("{\"native\":{\"chainId\":1,\"min\":"
            "\"115792089237316195423570985008687907853269984665640564039457584007913129639936\"}}",
            "rule.native.min");
    refused("{\"native\":{\"chainId\":5,\"min\":\"1\"}}", "rule.native.chainId");
    refused("{\"native\":{\"chainId\":\"1\",\"min\":\"1\"}}", "rule.native.chainId");
    refused("{\"erc721\":{\"chainId\":1,\"contract\":\"0x12\"}}", "rule.erc721.contract");
    refused("{\"erc721\":{\"chainId\":1,\"contract\":\"" C "\",\"owner\":\"x\"}}",
            "rule.erc721.owner");
    refused("{\"role\":{\"entityID\":\"" E "\",\"role\":\"king\"}}", "rule.role.role");
    refused("{\"level\":{\"entityID\":\"c-1\",\"lvID\":\"a\"}}", "rule.level.entityID");
    refused("{\"any\":[]}", "rule.any");
    refused("{\"atLeast\":3,\"of\":[{\"native\":{\"chainId\":1,\"min\":\"1\"}},"
            "{\"native\":{\"chainId\":1,\"min\":\"2\"}}]}",
            "rule.atLeast");
    refused("{\"not\":{\"any\":[{\"nope\":{}}]}}", "rule.not.any[0]");
    refused("{\"all\":[{\"native\":{\"chainId\":1,\"min\":\"1\"}}],\"any\":[]}", "rule");
    refused("[1]", "rule");
}

static void test_limits(void **state)
{
    (void)state;
    const char *leaf = "{\"native\":{\"chainId\":1,\"min\":\"1\"}}";
    /* depth 4 is the deepest: not(not(not(leaf))) */
    char text[8192];
    snprintf(text, sizeof text, "{\"not\":{\"not\":{\"not\":%s}}}", leaf);
    round_trip(text);
    snprintf(text, sizeof text, "{\"not\":{\"not\":{\"not\":{\"all\":[%s]}}}}", leaf);
    refused(text, "rule.not.not.not");
    /* 32 leaves, and not 33 */
    for (int n = 32; n <= 33; n++) {
        size_t at = (size_t)snprintf(text, sizeof text, "{\"any\":[");
        for (int i = 0; i < n; i++)
            at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", i ? "," : "", leaf);
        snprintf(text + at, sizeof text - at, "]}");
        verr e;
        assert_int_equal(parse(text, &e), n == 32 ? 0 : -1);
        if (n == 33)
            assert_string_equal(e.field, "rule.any");
    }
    /* spread over nested combinators too */
    size_t at = (size_t)snprintf(text, sizeof text, "{\"all\":[");
    for (int g = 0; g < 3; g++) {
        at += (size_t)snprintf(text + at, sizeof text - at, "%s{\"any\":[", g ? "," : "");
        for (int i = 0; i < 11; i++)
            at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", i ? "," : "", leaf);
        at += (size_t)snprintf(text + at, sizeof text - at, "]}");
    }
    snprintf(text + at, sizeof text - at, "]}");
    refused(text, "rule.all[2].any[10]");
}

static void test_three_values(void **state)
{
    (void)state;
    verr e;
    const char *L = "{\"native\":{\"chainId\":1,\"min\":\"1\"}}";
    char text[1024];
    const jr_truth F = JR_FALSE, T = JR_TRUE, X = JR_ERROR;
    /* all */
    snprintf(text, sizeof text, "{\"all\":[%s,%s]}", L, L);
    assert_int_equal(parse(text, &e), 0);
    jr_truth v[4];
    const jr_truth all[][3] = {{T, T, T}, {T, F, F}, {X, F, F}, {X, T, X}, {X, X, X}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        v[0] = all[i][0], v[1] = all[i][1];
        assert_int_equal(joinrule_judge(&rule, v), all[i][2]);
    }
    /* any */
    snprintf(text, sizeof text, "{\"any\":[%s,%s]}", L, L);
    assert_int_equal(parse(text, &e), 0);
    const jr_truth any[][3] = {{F, F, F}, {F, T, T}, {X, T, T}, {X, F, X}};
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++) {
        v[0] = any[i][0], v[1] = any[i][1];
        assert_int_equal(joinrule_judge(&rule, v), any[i][2]);
    }
    /* not */
    snprintf(text, sizeof text, "{\"not\":%s}", L);
    assert_int_equal(parse(text, &e), 0);
    v[0] = T, assert_int_equal(joinrule_judge(&rule, v), F);
    v[0] = F, assert_int_equal(joinrule_judge(&rule, v), T);
    v[0] = X, assert_int_equal(joinrule_judge(&rule, v), X);
    /* atLeast 2 of 3: decided once the known children decide it */
    snprintf(text, sizeof text, "{\"atLeast\":2,\"of\":[%s,%s,%s]}", L, L, L);
    assert_int_equal(parse(text, &e), 0);
    const jr_truth least[][4] = {{T, T, X, T}, {F, F, X, F}, {T, F, X, X},
                                 {T, X, X, X}, {F, X, F, F}, {T, F, T, T}};
    for (size_t i = 0; i < sizeof least / sizeof least[0]; i++) {
        v[0] = least[i][0], v[1] = least[i][1], v[2] = least[i][2];
        assert_int_equal(joinrule_judge(&rule, v), least[i][3]);
    }
    /* nested: all[any[X, T], not(F)] is true */
    snprintf(text, sizeof text, "{\"all\":[{\"any\":[%s,%s]},{\"not\":%s}]}", L, L, L);
    assert_int_equal(parse(text, &e), 0);
    v[0] = X, v[1] = T, v[2] = F;
    assert_int_equal(joinrule_judge(&rule, v), T);
    v[1] = F;
    assert_int_equal(joinrule_judge(&rule, v), X);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_round_trips),
        cmocka_unit_test(test_refusals_name_their_field),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_three_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
