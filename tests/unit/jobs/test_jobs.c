/* jobs: the erasure and the sweeper against a real redis-server started by the test
 * (support/redis_server.h), with no HTTP: the state a delete or a removal leaves is written with
 * a raw connection, the job is kicked on its own loop, and the keys are read back.
 *
 * erasure:
 * An erasure unlinks every key of the entity (keys.h: all start "ent:{<id>}") and its record, drops
 * its entry and leaves every other entity's keys alone; the alias claim the record names is
 * released before the record goes, by its exact token (a claim another entity took over stays); an
 * entry whose record is absent is dropped once older than the grace period, never before; a record
 * whose lease another live worker holds is left alone.
 *
 * sweeper: an entity listed here is not listed again within half the grace period (another
 * entity, a clock gone back, or half the period past, are); a read's note of waiting work lists
 * the entity in the sweeps set once; an entry whose entity is gone (deleted) is dropped at once,
 * one whose entity has nothing left to sweep only a grace period after its listing. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "core/app.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "core/log.h"
#include "core/metrics.h"
#include "jobs/erasure.h"
#include "jobs/sweeper.h"
#include "redis/keys.h"
#include "redis/store.h"
#include "loop.h"
#include "redis_server.h"

static struct {
    uv_loop_t loop;
    app a;
    erasure *e;
    sweeper *sw;
    redisContext *raw;
    bool open;
} T;

static uint64_t now_msec(void)
{
    return uv_hrtime() / 1000000;
}

/* --- the raw connection (hiredis's blocking client) --- */

static redisReply *cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(T.raw, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    return r;
}

/* An integer reply's value (r is freed). */
static long long int_of(redisReply *r)
{
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

#define cmd_int(...) int_of(cmd(__VA_ARGS__))
#define cmd_ok(...)  freeReplyObject(cmd(__VA_ARGS__))

/* The value of a string key, "" when absent (out has room for 128 bytes). */
static const char *get(const char *key, char out[128])
{
    redisReply *r = cmd("GET %s", key);
    snprintf(out, 128, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    return out;
}

/* --- the loop, the store and the erasure --- */

/* Runs the loop until pred() or ms pass; returns whether pred() held. pred reads Redis over
 * the raw connection between loop turns. */
static bool run_until(bool (*pred)(const void *), const void *arg, int ms)
{
    uint64_t end = now_msec() + (uint64_t)ms, next_look = 0;
    while (now_msec() < end) {
        uv_run(&T.loop, UV_RUN_NOWAIT);
        if (now_msec() >= next_look) {
            if (pred(arg))
                return true;
            next_look = now_msec() + 10;
        }
        usleep(1000);
    }
    return pred(arg);
}

static bool store_is_ready(const void *arg)
{
    (void)arg;
    return store_ready(T.a.store);
}

static int setup(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    memset(&T, 0, sizeof T);
    struct timeval tv = {2, 0};
    T.raw = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
    assert_true(T.raw && !T.raw->err);
    cmd_ok("FLUSHALL");
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", redis_port);
    setenv("REDIS_URL", url, 1);
    setenv("DEV", "1", 1);
    setenv("READ_CACHE_MB", "0", 1);
    setenv("ERASE_POLL_MS", "3600000", 1); /* only kicks start a poll */
    setenv("ERASE_PAUSE_MS", "0", 1);
    setenv("ERASE_STEP_KEYS", "10", 1); /* several steps for the keys below */
    setenv("SWEEP_POLL_MS", "3600000", 1);
    assert_int_equal(uv_loop_init(&T.loop), 0);
    T.a.loop = &T.loop;
    T.open = true;
    char err[256] = "";
    char *argv[] = {"test_erasure", NULL};
    assert_int_equal(config_load(&T.a.cfg, 1, argv, err, sizeof err), CONFIG_OK);
    assert_int_equal(store_new(&T.a.store, &T.a, err, sizeof err), 0);
    assert_true(run_until(store_is_ready, NULL, 10000));
    T.e = erasure_new(&T.a);
    assert_non_null(T.e);
    T.sw = sweeper_new(&T.a);
    assert_non_null(T.sw);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int rc = 0;
    if (T.open) {
        erasure_close(T.e);
        sweeper_close(T.sw);
        store_close(T.a.store);
        if (!loop_drain(&T.loop, 5000))
            rc = -1;
        erasure_free(T.e);
        sweeper_free(T.sw);
        store_free(T.a.store);
        config_free(&T.a.cfg);
        metrics_reset_sources();
        if (uv_loop_close(&T.loop) != 0)
            rc = -1;
        T.open = false;
    }
    if (T.raw)
        redisFree(T.raw);
    T.raw = NULL;
    return rc;
}

/* --- the state a delete leaves --- */

typedef struct ent {
    char id[IDS_SIZE];
    char record[KEYS_ENTITY_SIZE];
    char keys[32][KEYS_ENTITY_SIZE]; /* the entity's keys besides its record */
    int nkeys;
} ent;

/* An entity's keys of several types under its hash tag (n of them), not yet deleted. */
static void make_keys(ent *x, int n)
{
    assert_true(n <= 32);
    assert_int_equal(ids_new(x->id, 'c'), 0);
    keys_erasure(x->record, x->id);
    x->nkeys = n;
    for (int i = 0; i < n; i++) {
        char *k = x->keys[i];
        switch (i % 3) {
        case 0:
            snprintf(k, KEYS_ENTITY_SIZE, "ent:{%s}:set%d", x->id, i);
            cmd_ok("SADD %s a b c", k);
            break;
        case 1:
            snprintf(k, KEYS_ENTITY_SIZE, "ent:{%s}:zset%d", x->id, i);
            cmd_ok("ZADD %s 1 a 2 b", k);
            break;
        default:
            snprintf(k, KEYS_ENTITY_SIZE, "ent:{%s}:idem:%d", x->id, i);
            cmd_ok("SET %s v", k);
        }
    }
}

/* What a delete leaves: the record and the entry "<id>:<ms>:<token>" in the erasures set. */
static void make_deleted(ent *x, int nkeys, const char *alias, const char *claim)
{
    make_keys(x, nkeys);
    int64_t now = isotime_now_ms();
    cmd_ok("HSET %s deletedBy 0x0000000000000000000000000000000000000001 deletedRedisMs %lld",
           x->record, (long long)now);
    if (alias)
        cmd_ok("HSET %s communityURLAlias %s aliasClaim %s", x->record, alias, claim);
    cmd_ok("ZADD %s 0 %s:%lld:tok", KEYS_ERASURES, x->id, (long long)now);
}

static int exists(const char *key)
{
    return (int)cmd_int("EXISTS %s", key);
}

static int keys_left(const ent *x)
{
    int n = exists(x->record);
    for (int i = 0; i < x->nkeys; i++)
        n += exists(x->keys[i]);
    return n;
}

static bool set_empty(const void *arg)
{
    (void)arg;
    return cmd_int("ZCARD %s", KEYS_ERASURES) == 0;
}

static bool entry_gone(const void *entry)
{
    const char *e = entry;
    return cmd_int("ZLEXCOUNT %s [%s [%s", KEYS_ERASURES, e, e) == 0;
}

/* --- the tests --- */

static void test_erases_the_entity_and_nothing_else(void **state)
{
    (void)state;
    ent x, other;
    make_keys(&other, 6);
    cmd_ok("HSET ent:{%s} name other", other.id);
    make_deleted(&x, 30, NULL, NULL);
    assert_int_equal(keys_left(&x), 31);
    erasure_kick(T.e);
    assert_true(run_until(set_empty, NULL, 20000));
    assert_int_equal(keys_left(&x), 0);
    assert_int_equal(keys_left(&other), 6);
    assert_int_equal(cmd_int("EXISTS ent:{%s}", other.id), 1);
}

static void test_alias_claim_released_by_its_token_first(void **state)
{
    (void)state;
    ent x, y;
    char ax[KEYS_ALIAS_SIZE], ay[KEYS_ALIAS_SIZE], v[128];
    keys_alias(ax, "erased-alias");
    keys_alias(ay, "taken-over");
    make_deleted(&x, 3, "erased-alias", "tokx");
    make_deleted(&y, 3, "taken-over", "toky");
    char claim_x[128];
    snprintf(claim_x, sizeof claim_x, "%s 1700000000 tokx", x.id);
    cmd_ok("SET %s %s", ax, claim_x);
    /* y's claim was taken over by another entity meanwhile: another holder and token. */
    cmd_ok("SET %s %s", ay, "c-00000000-0000-4000-8000-000000000000 1700000000 other");
    erasure_kick(T.e);
    assert_true(run_until(set_empty, NULL, 20000));
    assert_int_equal(keys_left(&x), 0);
    assert_int_equal(keys_left(&y), 0);
    assert_int_equal(exists(ax), 0);
    assert_string_equal(get(ay, v), "c-00000000-0000-4000-8000-000000000000 1700000000 other");
}

static void test_entry_without_record_dropped_after_grace_only(void **state)
{
    (void)state;
    char old_id[IDS_SIZE], young_id[IDS_SIZE], old_entry[128], young_entry[128];
    assert_int_equal(ids_new(old_id, 'c'), 0);
    assert_int_equal(ids_new(young_id, 'c'), 0);
    int64_t now = isotime_now_ms();
    /* Older than any grace period (at least 60 s), and just made. */
    snprintf(old_entry, sizeof old_entry, "%s:%lld:tok", old_id, (long long)(now - 600000));
    snprintf(young_entry, sizeof young_entry, "%s:%lld:tok", young_id, (long long)now);
    cmd_ok("ZADD %s 0 %s 0 %s", KEYS_ERASURES, old_entry, young_entry);
    erasure_kick(T.e);
    assert_true(run_until(entry_gone, old_entry, 20000));
    /* Both entries are tried in the poll that dropped the old one; the young one, whose
     * delete may still be on its way, stays. */
    assert_false(run_until(entry_gone, young_entry, 500));
}

static void test_lease_of_another_worker_is_left_alone(void **state)
{
    (void)state;
    ent x;
    make_deleted(&x, 6, NULL, NULL);
    redisReply *t = cmd("TIME");
    long long redis_ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    cmd_ok("HSET %s leaseOwner someoneelse leaseUntil %lld", x.record, redis_ms + 600000);
    /* An entry without a record, older than the grace period: its drop shows the poll ran. */
    char gone_id[IDS_SIZE], gone_entry[128];
    assert_int_equal(ids_new(gone_id, 'c'), 0);
    snprintf(gone_entry, sizeof gone_entry, "%s:%lld:tok", gone_id,
             (long long)(isotime_now_ms() - 600000));
    cmd_ok("ZADD %s 0 %s", KEYS_ERASURES, gone_entry);
    erasure_kick(T.e);
    assert_true(run_until(entry_gone, gone_entry, 20000));
    assert_false(run_until(set_empty, NULL, 500));
    assert_int_equal(keys_left(&x), 7);
}

/* --- the sweeper --- */

static bool swept_out(const void *id)
{
    redisReply *r = cmd("ZRANK %s %s", KEYS_SWEEPS, (const char *)id);
    bool out = r->type == REDIS_REPLY_NIL;
    freeReplyObject(r);
    return out;
}

static void test_sweeper_lists_an_entity_once_a_half_grace(void **state)
{
    (void)state;
    char a[IDS_SIZE], b[IDS_SIZE];
    assert_int_equal(ids_new(a, 'c'), 0);
    assert_int_equal(ids_new(b, 'c'), 0);
    int64_t t = 1700000000000, half = 30000; /* the grace period is 60 s at these settings */
    assert_true(sweeper_must_list(T.sw, a, t));
    sweeper_listed(T.sw, a, t);
    assert_false(sweeper_must_list(T.sw, a, t + 1));
    assert_false(sweeper_must_list(T.sw, a, t + half - 1));
    assert_true(sweeper_must_list(T.sw, a, t + half));
    assert_true(sweeper_must_list(T.sw, a, t - 1)); /* the clock went back */
    assert_true(sweeper_must_list(T.sw, b, t + 1));
}

static void test_sweeper_note_of_waiting_work_lists_once(void **state)
{
    (void)state;
    char id[IDS_SIZE];
    assert_int_equal(ids_new(id, 'c'), 0);
    sweeper_note_waiting(T.sw, id);
    assert_false(run_until(swept_out, id, 5000)); /* listed */
    cmd_ok("DEL %s", KEYS_SWEEPS);
    sweeper_note_waiting(T.sw, id); /* listed lately here: not again */
    assert_true(run_until(swept_out, id, 300));
    assert_int_equal(cmd_int("EXISTS %s", KEYS_SWEEPS), 0);
}

static void test_sweeper_drops_a_deleted_entity_at_once_a_done_one_after_grace(void **state)
{
    (void)state;
    char gone[IDS_SIZE], done[IDS_SIZE];
    assert_int_equal(ids_new(gone, 'c'), 0);
    assert_int_equal(ids_new(done, 'c'), 0);
    cmd_ok("HSET ent:{%s} name done", done); /* nothing of it to sweep */
    long long now = (long long)isotime_now_ms();
    cmd_ok("ZADD %s %lld %s %lld %s", KEYS_SWEEPS, now, gone, now, done);
    sweeper_kick(T.sw);
    assert_true(run_until(swept_out, gone, 20000));
    /* Both were stepped in that poll; the done one, listed just now, stays its grace period. */
    assert_false(run_until(swept_out, done, 500));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_erases_the_entity_and_nothing_else, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alias_claim_released_by_its_token_first, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_entry_without_record_dropped_after_grace_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lease_of_another_worker_is_left_alone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sweeper_lists_an_entity_once_a_half_grace, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sweeper_note_of_waiting_work_lists_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_sweeper_drops_a_deleted_entity_at_once_a_done_one_after_grace, setup, teardown),
    };
    log_set_level(LOG_ERROR);
    return redis_tests_result(
        cmocka_run_group_tests(tests, redis_group_setup, redis_group_teardown));
}
