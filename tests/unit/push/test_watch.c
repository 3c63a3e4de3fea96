/* watch: a write to a watched entity's events key (by another client, as another instance
 * would) calls its subscribers, once per burst, again on the next write (the key is read
 * again to stay tracked), not for another entity's key, and every WATCH_POLL_MS while the read
 * cache is off. Against a real redis-server with the read cache's real tracking. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "core/app.h"
#include "core/config.h"
#include "cache/readcache.h"
#include "loop.h"
#include "push/watch.h"
#include "redis/store.h"
#include "redis/tracking.h"
#include "redis_server.h"

static struct {
    uv_loop_t loop;
    app a;
    watch *w;
    redisContext *raw;
    int calls[2];
    char last[64];
} T;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool pump_step(uint64_t end)
{
    uv_run(&T.loop, UV_RUN_NOWAIT);
    usleep(1000);
    return now_ms() < end;
}

#define WAIT_FOR(cond, ms)                                                                         \
    do {                                                                                           \
        uint64_t end_ = now_ms() + (uint64_t)(ms);                                                 \
        while (!(cond) && pump_step(end_)) {                                                       \
        }                                                                                          \
        assert_true(cond);                                                                         \
    } while (0)

static void pump(int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    while (pump_step(end)) {
    }
}

static void on_call(void *data, const char *entity_id)
{
    int *n = data;
    (*n)++;
    snprintf(T.last, sizeof T.last, "%s", entity_id);
}

static void raw(const char *fmt, const char *arg)
{
    redisReply *r = redisCommand(T.raw, fmt, arg);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

static void open_all(const char *cache_mb)
{
    if (!have_redis)
        skip();
    memset(&T, 0, sizeof T);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", redis_port);
    setenv("REDIS_URL", url, 1);
    setenv("DEV", "1", 1);
    setenv("READ_CACHE_MB", cache_mb, 1);
    assert_int_equal(uv_loop_init(&T.loop), 0);
    T.a.loop = &T.loop;
    char err[256] = "";
    char *argv[] = {"test_watch", NULL};
    assert_int_equal(config_load(&T.a.cfg, 1, argv, err, sizeof err), CONFIG_OK);
    assert_int_equal(store_new(&T.a.store, &T.a, err, sizeof err), 0);
    if (T.a.cfg.read_cache_mb > 0) {
        T.a.reads = readcache_new((size_t)T.a.cfg.read_cache_mb << 20);
        T.a.tracking = tracking_new(&T.a);
    }
    T.w = watch_new(&T.a);
    assert_non_null(T.w);
    WAIT_FOR(store_ready(T.a.store), 5000);
    if (T.a.reads)
        WAIT_FOR(readcache_enabled(T.a.reads), 5000);
    struct timeval tv = {2, 0};
    T.raw = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
    assert_non_null(T.raw);
    assert_int_equal(T.raw->err, 0);
}

static int teardown(void **state)
{
    (void)state;
    if (T.raw)
        redisFree(T.raw);
    watch_close(T.w);
    tracking_close(T.a.tracking);
    if (T.a.store)
        store_close(T.a.store);
    int rc = loop_drain(&T.loop, 5000) ? 0 : -1;
    watch_free(T.w);
    tracking_free(T.a.tracking);
    store_free(T.a.store);
    readcache_free(T.a.reads);
    uv_loop_close(&T.loop);
    config_free(&T.a.cfg);
    memset(&T, 0, sizeof T);
    return rc;
}

static void test_a_write_calls_once_per_burst_and_again_later(void **state)
{
    (void)state;
    open_all("8");
    watch_sub *a = watch_subscribe(T.w, "c-watch-a", on_call, &T.calls[0]);
    watch_sub *b = watch_subscribe(T.w, "c-watch-b", on_call, &T.calls[1]);
    assert_non_null(a);
    assert_non_null(b);
    pump(200); /* the tracked reads are answered */
    assert_int_equal(T.calls[0], 0);
    /* a burst: five writes in one go from another client */
    for (int i = 0; i < 5; i++)
        raw("XADD %s * type x", "ent:{c-watch-a}:events");
    WAIT_FOR(T.calls[0] >= 1, 3000);
    pump(300);
    assert_true(T.calls[0] <= 2); /* one burst, not one call per write */
    assert_string_equal(T.last, "c-watch-a");
    assert_int_equal(T.calls[1], 0);
    /* tracked again: a later write is heard too */
    int before = T.calls[0];
    raw("XADD %s * type y", "ent:{c-watch-a}:events");
    WAIT_FOR(T.calls[0] > before, 3000);
    /* a key of another shape of the same entity is no event */
    before = T.calls[0];
    raw("SET %s 1", "ent:{c-watch-a}:other");
    pump(300);
    assert_int_equal(T.calls[0], before);
    /* an unsubscribed entity is called no more */
    watch_unsubscribe(a);
    raw("XADD %s * type z", "ent:{c-watch-a}:events");
    raw("XADD %s * type z", "ent:{c-watch-b}:events");
    WAIT_FOR(T.calls[1] >= 1, 3000);
    assert_int_equal(T.calls[0], before);
    watch_unsubscribe(b);
}

static void test_without_the_cache_every_entity_is_polled(void **state)
{
    (void)state;
    open_all("0");
    watch_sub *a = watch_subscribe(T.w, "c-watch-p", on_call, &T.calls[0]);
    assert_non_null(a);
    uint64_t start = now_ms();
    WAIT_FOR(T.calls[0] >= 2, 3 * WATCH_POLL_MS + 1000);
    assert_true(now_ms() - start >= WATCH_POLL_MS);
    watch_unsubscribe(a);
}

/* A subscriber that unsubscribes itself and the next one from inside its call. */
static watch_sub *victims[2];
static void on_call_unsub(void *data, const char *entity_id)
{
    (void)entity_id;
    (*(int *)data)++;
    watch_unsubscribe(victims[0]);
    watch_unsubscribe(victims[1]);
    victims[0] = victims[1] = NULL;
}

static void test_unsubscribing_inside_a_call(void **state)
{
    (void)state;
    open_all("8");
    victims[1] = watch_subscribe(T.w, "c-watch-u", on_call, &T.calls[1]);
    victims[0] = watch_subscribe(T.w, "c-watch-u", on_call_unsub, &T.calls[0]);
    pump(200);
    raw("XADD %s * type x", "ent:{c-watch-u}:events");
    WAIT_FOR(T.calls[0] == 1, 3000);
    assert_int_equal(T.calls[1], 0); /* it was after the first in the list: never called */
    raw("XADD %s * type x", "ent:{c-watch-u}:events");
    pump(300);
    assert_int_equal(T.calls[0], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_a_write_calls_once_per_burst_and_again_later, teardown),
        cmocka_unit_test_teardown(test_without_the_cache_every_entity_is_polled, teardown),
        cmocka_unit_test_teardown(test_unsubscribing_inside_a_call, teardown),
    };
    return redis_tests_result(
        cmocka_run_group_tests(tests, redis_group_setup, redis_group_teardown));
}
