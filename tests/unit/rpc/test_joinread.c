/* joinread without a chain: the batch's layout (getBlockNumber first, one ownerOf per token
 * leaf, then every other leaf of the chain per address, leaves of other chains and level/role
 * leaves left out), its results read back (thresholds, a reverted ownerOf false, a failed call
 * erring alone, an unreadable block failing the batch), and the per-chain cap against a closed
 * loopback port: a foreground read past it is CAPPED with retry_after and sends nothing, a
 * background read waits for room and is then sent, the waiting queue is bounded, closing
 * answers every read once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "rpc/joinbatch.h"
#include "rpc/joinread.h"
#include "loop.h"

static const uint8_t MC[20] = {0xca, 0x11, 0xbd, 0xe0};

static joinread_leaf leaf(int kind, uint64_t chain, const char *contract, const char *token,
                          const char *min)
{
    joinread_leaf l = {.kind = kind, .chain = chain};
    snprintf(l.contract, sizeof l.contract, "%s", contract);
    snprintf(l.token, sizeof l.token, "%s", token);
    snprintf(l.min, sizeof l.min, "%s", min);
    return l;
}

#define TOKEN_A "0x1111111111111111111111111111111111111111"
#define TOKEN_B "0x2222222222222222222222222222222222222222"

/* erc20 on 1, level, erc721 #7 on 1, native on 1, erc1155 on 5, erc721 any on 1. */
static joinread_rule sample_rule(void)
{
    joinread_rule r = {.leaves = 6};
    r.leaf[0] = leaf(JOINREAD_LEAF_ERC20, 1, TOKEN_A, "", "100");
    r.leaf[1] = leaf(JOINREAD_LEAF_OTHER, 0, "", "", "");
    r.leaf[2] = leaf(JOINREAD_LEAF_ERC721, 1, TOKEN_B, "7", "");
    r.leaf[3] = leaf(JOINREAD_LEAF_NATIVE, 1, "", "", "1000000000000000000");
    r.leaf[4] = leaf(JOINREAD_LEAF_ERC1155, 5, TOKEN_A, "3", "2");
    r.leaf[5] = leaf(JOINREAD_LEAF_ERC721, 1, TOKEN_B, "", "");
    return r;
}

static void test_layout(void **state)
{
    (void)state;
    joinread_rule r = sample_rule();
    joinbatch_leaf l[JOINREAD_MAX_LEAVES];
    assert_int_equal(joinbatch_parse(&r, l), 0);
    uint8_t addrs[3][20] = {{1}, {2}, {3}};
    joinbatch b = {0};
    assert_int_equal(joinbatch_build(&b, l, r.leaves, 1, MC, (const uint8_t(*)[20])addrs, 3), 0);
    /* block, ownerOf once, then 3 leaves (erc20, native, erc721 any) x 3 addresses */
    assert_int_equal(b.ncalls, 1 + 1 + 3 * 3);
    assert_memory_equal(b.calls[0].target, MC, 20);
    assert_int_equal(b.slot[0].leaf, -1);
    assert_int_equal(b.slot[1].leaf, 2);
    assert_int_equal(b.slot[1].addr, -1);
    assert_int_equal(b.calls[1].target[0], 0x22);
    static const int order[] = {0, 3, 5};
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 3; k++) {
            const joinbatch_slot *s = &b.slot[2 + a * 3 + k];
            assert_int_equal(s->addr, a);
            assert_int_equal(s->leaf, order[k]);
        }
    /* native: getEthBalance on Multicall3 itself, naming the address */
    assert_memory_equal(b.calls[3].target, MC, 20);
    assert_int_equal(b.calls[3].data[4 + 12], 1);
    joinbatch_free(&b);
    assert_int_equal(joinbatch_build(&b, l, r.leaves, 5, MC, (const uint8_t(*)[20])addrs, 3), 0);
    assert_int_equal(b.ncalls, 1 + 3);
    assert_int_equal(b.calls[1].len, 4 + 64);
    joinbatch_free(&b);
    /* A malformed leaf is refused. */
    r.leaf[0].min[0] = 'x';
    assert_int_equal(joinbatch_parse(&r, l), -1);
}

static uint8_t words[16][32];

static multicall_result word_result(int i, uint64_t v)
{
    memset(words[i], 0, 32);
    for (int k = 0; k < 8; k++)
        words[i][31 - k] = (uint8_t)(v >> (8 * k));
    return (multicall_result){.ok = true, .data = words[i], .len = 32};
}

static void test_read(void **state)
{
    (void)state;
    joinread_rule r = sample_rule();
    joinbatch_leaf l[JOINREAD_MAX_LEAVES];
    assert_int_equal(joinbatch_parse(&r, l), 0);
    uint8_t addrs[2][20] = {{1}, {2}};
    joinbatch b = {0};
    assert_int_equal(joinbatch_build(&b, l, r.leaves, 1, MC, (const uint8_t(*)[20])addrs, 2), 0);
    assert_int_equal(b.ncalls, 8);
    multicall_result res[8];
    res[0] = word_result(0, 4242);
    res[1] = word_result(1, 0); /* ownerOf: address 2 */
    words[1][12] = 2;
    res[2] = word_result(2, 100);             /* a0 erc20: exactly min */
    res[3] = (multicall_result){.ok = false}; /* a0 native: the call failed */
    res[4] = word_result(4, 0);               /* a0 erc721 any: none */
    res[5] = word_result(5, 99);              /* a1 erc20: one short */
    res[6] = word_result(6, 1000000000000000000ull);
    res[7] = (multicall_result){.ok = true, .data = words[7], .len = 0}; /* no word */
    joinread_value v[2 * 6];
    for (int i = 0; i < 12; i++)
        v[i] = (joinread_value){.truth = JOINREAD_ERROR};
    uint64_t block = 0;
    assert_int_equal(joinbatch_read(&b, l, 6, (const uint8_t(*)[20])addrs, res, v, &block), 0);
    assert_int_equal(block, 4242);
    assert_int_equal(v[0].truth, JOINREAD_TRUE);
    assert_string_equal(v[0].have, "100");
    assert_int_equal(v[1].truth, JOINREAD_ERROR); /* level: untouched */
    assert_int_equal(v[2].truth, JOINREAD_FALSE);
    assert_string_equal(v[2].have, "0");
    assert_int_equal(v[3].truth, JOINREAD_ERROR);
    assert_int_equal(v[4].truth, JOINREAD_ERROR); /* chain 5's: not this batch's */
    assert_int_equal(v[5].truth, JOINREAD_FALSE);
    assert_int_equal(v[6 + 0].truth, JOINREAD_FALSE);
    assert_string_equal(v[6 + 0].have, "99");
    assert_int_equal(v[6 + 2].truth, JOINREAD_TRUE);
    assert_string_equal(v[6 + 2].have, "1");
    assert_int_equal(v[6 + 3].truth, JOINREAD_TRUE);
    assert_string_equal(v[6 + 3].have, "1000000000000000000");
    assert_int_equal(v[6 + 5].truth, JOINREAD_ERROR);
    /* A reverted ownerOf is false for every address. */
    res[1] = (multicall_result){.ok = false};
    assert_int_equal(joinbatch_read(&b, l, 6, (const uint8_t(*)[20])addrs, res, v, &block), 0);
    assert_int_equal(v[2].truth, JOINREAD_FALSE);
    assert_int_equal(v[6 + 2].truth, JOINREAD_FALSE);
    assert_string_equal(v[6 + 2].have, "0");
    /* No block: the answer is not the batch's. */
    res[0] = (multicall_result){.ok = false};
    assert_int_equal(joinbatch_read(&b, l, 6, (const uint8_t(*)[20])addrs, res, v, &block), -1);
    joinbatch_free(&b);
}

/* --- the cap, against a port nobody listens on --- */

static uv_loop_t loop;
static config cfg;
static char urls[256];

typedef struct seen {
    int calls, status;
    int64_t retry_after;
    uint64_t at_ms;
} seen;

static void on_answer(void *data, const joinread_answer *a)
{
    seen *s = data;
    s->calls++;
    s->status = a->status;
    s->retry_after = a->retry_after;
    s->at_ms = uv_hrtime() / 1000000;
}

static bool run_until(const int *flag, int want, int ms)
{
    uint64_t end = uv_hrtime() / 1000000 + (uint64_t)ms;
    while (*flag < want && uv_hrtime() / 1000000 < end) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return *flag >= want;
}

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_ERROR);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd); /* nobody listens there now: every call fails at once */
    snprintf(urls, sizeof urls, "1=http://127.0.0.1:%d,5=http://127.0.0.1:%d", ntohs(a.sin_port),
             ntohs(a.sin_port));
    memset(&cfg, 0, sizeof cfg);
    cfg.eth_rpc_urls = urls;
    cfg.eth_rpc_url = "";
    cfg.auth_chain_id = 1;
    cfg.multicall3_address = "0xcA11bde05977b3631167028862bE2a173976CA11";
    cfg.join_rpc_max_per_second = 2;
    cfg.eth_rpc_timeout_ms = 2000;
    cfg.eth_rpc_max_inflight = 64;
    return uv_loop_init(&loop);
}

static int teardown(void **state)
{
    (void)state;
    loop_drain(&loop, 5000);
    metrics_reset_sources();
    return uv_loop_close(&loop) == 0 ? 0 : -1;
}

static void test_chains_known(void **state)
{
    (void)state;
    joinread *j;
    char err[256];
    assert_int_equal(joinread_new(&j, &loop, &cfg, err, sizeof err), 0);
    assert_true(joinread_chain_known(j, 1));
    assert_true(joinread_chain_known(j, 5));
    assert_false(joinread_chain_known(j, 137));
    joinread_rule r = sample_rule();
    assert_true(joinread_has_chain_leaves(&r));
    uint8_t a[1][20] = {{1}};
    seen s = {0};
    r.leaf[4].chain = 137; /* a chain without a URL */
    assert_int_equal(joinread_start(j, &r, (const uint8_t(*)[20])a, 1, false, on_answer, &s), -1);
    assert_int_equal(joinread_start(j, &r, (const uint8_t(*)[20])a, 0, false, on_answer, &s), -1);
    /* Level and role leaves alone: answered OK, no chain asked, on a later turn. */
    joinread_rule none = {.leaves = 1};
    assert_false(joinread_has_chain_leaves(&none));
    assert_int_equal(joinread_start(j, &none, (const uint8_t(*)[20])a, 1, false, on_answer, &s), 0);
    assert_int_equal(s.calls, 0);
    assert_true(run_until(&s.calls, 1, 2000));
    assert_int_equal(s.status, JOINREAD_OK);
    joinread_close(j);
    loop_drain(&loop, 2000);
    joinread_free(j);
}

static void test_cap(void **state)
{
    (void)state;
    joinread *j;
    char err[256];
    assert_int_equal(joinread_new(&j, &loop, &cfg, err, sizeof err), 0);
    joinread_rule r = sample_rule(); /* chains 1 and 5: a token of each per read */
    uint8_t a[1][20] = {{1}};
    seen s[6] = {{0}};
    /* Two tokens a second: two reads go out (and fail: nobody listens), the third is capped. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(joinread_start(j, &r, (const uint8_t(*)[20])a, 1, false, on_answer, &s[i]),
                         0);
    assert_int_equal(s[2].calls, 0); /* never inside start */
    for (int i = 0; i < 3; i++)
        assert_true(run_until(&s[i].calls, 1, 3000));
    assert_int_equal(s[0].status, JOINREAD_UNAVAILABLE);
    assert_int_equal(s[1].status, JOINREAD_UNAVAILABLE);
    assert_int_equal(s[2].status, JOINREAD_CAPPED);
    assert_int_equal(s[2].retry_after, 1);
    /* A background read waits for room instead: sent about half a second later. */
    uint64_t t0 = uv_hrtime() / 1000000;
    assert_int_equal(joinread_start(j, &r, (const uint8_t(*)[20])a, 1, true, on_answer, &s[3]), 0);
    assert_true(run_until(&s[3].calls, 1, 5000));
    assert_int_equal(s[3].status, JOINREAD_UNAVAILABLE);
    assert_true(s[3].at_ms - t0 >= 300);
    joinread_close(j);
    loop_drain(&loop, 2000);
    joinread_free(j);
    for (int i = 0; i < 4; i++)
        assert_int_equal(s[i].calls, 1);
}

static void test_queue_bound_and_close(void **state)
{
    (void)state;
    cfg.join_rpc_max_per_second = 1;
    joinread *j;
    char err[256];
    assert_int_equal(joinread_new(&j, &loop, &cfg, err, sizeof err), 0);
    joinread_rule r = {.leaves = 1};
    r.leaf[0] = leaf(JOINREAD_LEAF_ERC20, 1, TOKEN_A, "", "1");
    uint8_t a[1][20] = {{1}};
    enum { N = 300 };
    static seen s[N];
    memset(s, 0, sizeof s);
    int started = 0;
    for (int i = 0; i < N; i++)
        if (joinread_start(j, &r, (const uint8_t(*)[20])a, 1, true, on_answer, &s[i]) == 0)
            started++;
    /* One went out with the only token; 256 wait; the rest were refused. */
    assert_int_equal(started, 1 + 256);
    joinread_close(j);
    loop_drain(&loop, 2000);
    joinread_free(j);
    for (int i = 0; i < started; i++) {
        assert_int_equal(s[i].calls, 1);
        assert_int_equal(s[i].status, JOINREAD_UNAVAILABLE);
    }
    for (int i = started; i < N; i++)
        assert_int_equal(s[i].calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_read),
        cmocka_unit_test_setup_teardown(test_chains_known, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_bound_and_close, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
