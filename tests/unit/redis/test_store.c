/* store: the pipelined Redis connection against a real redis-server started by the test, with
 * no HTTP: commands, transactions and scripts round trip (a flushed script cache is recovered);
 * a command past REDIS_TIMEOUT_MS answers STORE_TIMEOUT once, and its late reply is dropped;
 * past REDIS_MAX_PENDING a command is refused at once and nothing is sent; a killed server
 * answers every pending command STORE_UNAVAILABLE once, and the store comes back by itself
 * with its scripts once the server does; store_close answers what is pending; the listener
 * hears each connection come and go. Script groups (group.h, with the award script): the calls
 * of one turn leave as one EVALSHA per shared part, each answered with its own reply; a full
 * group opens another; a closed store answers each call once. Every callback counts its calls.
 *
 * The server is /usr/bin/redis-server on a free loopback port, stopped by its pid when the
 * group ends (and at exit, and with the test process by PR_SET_PDEATHSIG). Without that
 * binary every test is skipped. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "core/app.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "redis/group.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"
#include "loop.h"
#include "redis_server.h"

static uint64_t now_ns(void)
{
    return uv_hrtime();
}

static uint64_t now_msec(void)
{
    return uv_hrtime() / 1000000;
}

/* --- a second, raw connection (hiredis's blocking client) --- */

static redisContext *raw_ctx;

static redisContext *raw(void)
{
    if (!raw_ctx) {
        struct timeval tv = {2, 0};
        raw_ctx = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
        assert_non_null(raw_ctx);
        assert_int_equal(raw_ctx->err, 0);
        struct timeval rtv = {5, 0};
        redisSetTimeout(raw_ctx, rtv);
    }
    return raw_ctx;
}

static void raw_close(void)
{
    if (raw_ctx)
        redisFree(raw_ctx);
    raw_ctx = NULL;
}

/* Runs a command on the raw connection; returns the integer, or 1 for +OK, or the length of a
 * bulk string copied to out (when given). Fails the test on an error reply. */
static long long raw_cmd(char *out, size_t out_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(raw(), fmt, ap);
    va_end(ap);
    assert_non_null(r);
    long long v = 0;
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        v = r->integer;
        break;
    case REDIS_REPLY_STATUS:
        v = !strcmp(r->str, "OK");
        break;
    case REDIS_REPLY_STRING:
        v = (long long)r->len;
        if (out)
            snprintf(out, out_len, "%s", r->str);
        break;
    case REDIS_REPLY_NIL:
        v = -1;
        break;
    case REDIS_REPLY_ARRAY:
        v = (long long)r->elements;
        break;
    default:
        fprintf(stderr, "raw: %s\n", r->str);
        freeReplyObject(r);
        fail();
    }
    freeReplyObject(r);
    return v;
}

/* Scripts the server holds: how many of the store's are in its script cache. */
static int scripts_loaded(void)
{
    int n = 0;
    for (int i = 0; i < LUA_SCRIPT_COUNT; i++) {
        redisReply *r = redisCommand(raw(), "SCRIPT EXISTS %s", lua_scripts[i].sha1);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        n += (int)r->element[0]->integer;
        freeReplyObject(r);
    }
    return n;
}

/* Sends a command on a connection of its own without waiting for its answer (DEBUG SLEEP):
 * raw_finish() reads it. */
static redisContext *sleeper;

static void raw_send_only(const char *cmd)
{
    struct timeval tv = {2, 0};
    sleeper = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
    assert_non_null(sleeper);
    assert_int_equal(sleeper->err, 0);
    struct timeval rtv = {10, 0};
    redisSetTimeout(sleeper, rtv);
    assert_int_equal(redisAppendCommand(sleeper, cmd), REDIS_OK);
    int done = 0;
    for (int i = 0; i < 100 && !done; i++)
        assert_int_equal(redisBufferWrite(sleeper, &done), REDIS_OK);
    assert_true(done);
}

static void raw_finish(void)
{
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(sleeper, (void **)&r), REDIS_OK);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(sleeper);
    sleeper = NULL;
}

/* --- the store under test --- */

#define MAX_ELEMS 8

/* What one callback saw; the records are static so that a test that fails with commands in
 * flight leaves nothing on a dead stack for teardown's store_close to write into. */
typedef struct rec {
    int calls, status, type;
    long long integer;
    char str[128];
    size_t elements;
    int etype[MAX_ELEMS];
    long long eint[MAX_ELEMS];
    char estr[MAX_ELEMS][64];
    uint64_t at_ns;
} rec;

#define NRECS 64
static rec R[NRECS];

static struct {
    uv_loop_t loop;
    app a;
    bool open;
    int heard_ready, heard_gone;
    int ready_unready;   /* heard ready=true while store_ready() said false */
    int gone_ready;      /* heard ready=false while store_ready() said true */
    rec *send_when_gone; /* a command the listener sends when it hears the connection go */
} T;

static store *st(void)
{
    return T.a.store;
}

static void on_rec(void *data, int status, redisReply *r)
{
    rec *x = data;
    x->calls++;
    x->status = status;
    x->at_ns = now_ns();
    x->type = r ? r->type : 0;
    if (!r)
        return;
    x->integer = r->integer;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR)
        snprintf(x->str, sizeof x->str, "%.*s", (int)r->len, r->str);
    x->elements = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    for (size_t i = 0; i < x->elements && i < MAX_ELEMS; i++) {
        const redisReply *e = r->element[i];
        x->etype[i] = e->type;
        x->eint[i] = e->integer;
        if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS ||
            e->type == REDIS_REPLY_ERROR)
            snprintf(x->estr[i], sizeof x->estr[i], "%.*s", (int)e->len, e->str);
    }
}

static void cmd_argv(rec *r, int argc, const char **argv)
{
    size_t lens[16];
    assert_true(argc <= 16);
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    store_command(st(), on_rec, r, argc, argv, lens);
}

#define CMD(r, ...)                                                                                \
    do {                                                                                           \
        const char *argv_[] = {__VA_ARGS__};                                                       \
        cmd_argv((r), (int)(sizeof argv_ / sizeof *argv_), argv_);                                 \
    } while (0)

/* admins_list of an entity: its sorted admins, with the platform's right to see them. */
static void admins_list(rec *r, const char *entity)
{
    char owners[64], admins[64];
    snprintf(owners, sizeof owners, "%s:owners", entity);
    snprintf(admins, sizeof admins, "%s:admins", entity);
    const char *argv[] = {entity, owners, admins, "", "1"};
    size_t lens[5];
    for (int i = 0; i < 5; i++)
        lens[i] = strlen(argv[i]);
    store_script(st(), LUA_ADMINS_LIST, on_rec, r, 3, 5, argv, lens);
}

static void on_listen(void *ctx, bool ready)
{
    (void)ctx;
    if (ready) {
        T.heard_ready++;
        if (!store_ready(st()))
            T.ready_unready++;
    } else {
        T.heard_gone++;
        if (store_ready(st()))
            T.gone_ready++;
        if (T.send_when_gone) {
            const char *argv[] = {"PING"};
            size_t lens[] = {4};
            store_command(st(), on_rec, T.send_when_gone, 1, argv, lens);
            T.send_when_gone = NULL;
        }
    }
}

static bool pump_step(uint64_t end)
{
    uv_run(&T.loop, UV_RUN_NOWAIT);
    usleep(1000);
    return now_msec() < end;
}

/* Runs the loop until cond holds, for ms at most; fails the test if it does not. */
#define WAIT_FOR(cond, ms)                                                                         \
    do {                                                                                           \
        uint64_t end_ = now_msec() + (uint64_t)(ms);                                               \
        while (!(cond) && pump_step(end_)) {                                                       \
        }                                                                                          \
        assert_true(cond);                                                                         \
    } while (0)

static void pump(int ms)
{
    uint64_t end = now_msec() + (uint64_t)ms;
    while (pump_step(end)) {
    }
}

/* An app with its own loop and configuration, and a store on it, ready. */
static void open_store(const char *timeout_ms, const char *max_pending)
{
    if (!have_redis)
        skip();
    memset(R, 0, sizeof R);
    memset(&T, 0, sizeof T);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", redis_port);
    setenv("REDIS_URL", url, 1);
    setenv("REDIS_TIMEOUT_MS", timeout_ms, 1);
    setenv("REDIS_MAX_PENDING", max_pending, 1);
    setenv("DEV", "1", 1);
    setenv("READ_CACHE_MB", "0", 1);
    assert_int_equal(uv_loop_init(&T.loop), 0);
    T.a.loop = &T.loop;
    T.open = true;
    char err[256] = "";
    char *argv[] = {"test_store", NULL};
    assert_int_equal(config_load(&T.a.cfg, 1, argv, err, sizeof err), CONFIG_OK);
    assert_int_equal(store_new(&T.a.store, &T.a, err, sizeof err), 0);
    store_set_listener(T.a.store, on_listen, NULL);
    WAIT_FOR(store_ready(st()), 5000);
    assert_int_equal(T.heard_ready, 1);
    assert_int_equal(T.heard_gone, 0);
    assert_int_equal(store_pending(st()), 0);
}

/* Closes the store, lets the loop finish, frees everything; a server the test stopped or
 * killed is resumed or started again for the next test. */
static int teardown(void **state)
{
    (void)state;
    int rc = 0;
    raw_close();
    if (sleeper) {
        redisFree(sleeper);
        sleeper = NULL;
    }
    if (T.open) {
        group_close(T.a.groups);
        if (T.a.store)
            store_close(T.a.store);
        if (!loop_drain(&T.loop, 5000))
            rc = -1;
        group_free(T.a.groups);
        T.a.groups = NULL;
        store_free(T.a.store);
        T.a.store = NULL;
        config_free(&T.a.cfg);
        metrics_reset_sources();
        if (uv_loop_close(&T.loop) != 0) {
            fprintf(stderr, "test_store: uv_loop_close failed: a handle is still open\n");
            rc = -1;
        }
        T.open = false;
    }
    if (have_redis) {
        if (redis_pid > 0)
            kill(redis_pid, SIGCONT);
        if (!redis_alive()) {
            if (redis_pid > 0)
                waitpid(redis_pid, NULL, 0);
            if (!redis_start())
                rc = -1;
        }
    }
    return rc;
}

/* --- tests --- */

static void test_command_round_trip(void **state)
{
    (void)state;
    open_store("2000", "64");
    CMD(&R[0], "SET", "rt:key", "a value");
    CMD(&R[1], "GET", "rt:key");
    CMD(&R[2], "GET", "rt:missing");
    CMD(&R[3], "INCR", "rt:key"); /* an error reply is still STORE_OK */
    assert_int_equal(R[0].calls + R[1].calls + R[2].calls + R[3].calls, 0);
    assert_int_equal(store_pending(st()), 4);
    WAIT_FOR(R[3].calls == 1, 2000);
    assert_int_equal(R[0].calls, 1);
    assert_int_equal(R[0].status, STORE_OK);
    assert_int_equal(R[0].type, REDIS_REPLY_STATUS);
    assert_string_equal(R[0].str, "OK");
    assert_int_equal(R[1].calls, 1);
    assert_int_equal(R[1].type, REDIS_REPLY_STRING);
    assert_string_equal(R[1].str, "a value");
    assert_int_equal(R[2].calls, 1);
    assert_int_equal(R[2].type, REDIS_REPLY_NIL);
    assert_int_equal(R[3].status, STORE_OK);
    assert_int_equal(R[3].type, REDIS_REPLY_ERROR);
    assert_int_equal(store_pending(st()), 0);
    assert_int_equal(store_get_stats(st())->errors, 1);
    /* The value is in Redis, as another client sees it. */
    char v[64] = "";
    assert_int_equal(raw_cmd(v, sizeof v, "GET rt:key"), 7);
    assert_string_equal(v, "a value");
    pump(50);
    assert_int_equal(R[0].calls + R[1].calls + R[2].calls + R[3].calls, 4);
}

static void test_exec_transaction(void **state)
{
    (void)state;
    open_store("2000", "64");
    const char *set[] = {"SET", "tx:n", "1"};
    const char *incr[] = {"INCR", "tx:n"};
    const char *get[] = {"GET", "tx:n"};
    const size_t set_l[] = {3, 4, 1}, incr_l[] = {4, 4}, get_l[] = {3, 4};
    const store_cmd cmds[] = {{3, set, set_l}, {2, incr, incr_l}, {2, get, get_l}};
    store_exec(st(), on_rec, &R[0], 3, cmds);
    assert_int_equal(R[0].calls, 0);
    assert_int_equal(store_pending(st()), 5); /* MULTI, three commands, EXEC */
    WAIT_FOR(R[0].calls == 1, 2000);
    assert_int_equal(R[0].status, STORE_OK);
    assert_int_equal(R[0].type, REDIS_REPLY_ARRAY);
    assert_int_equal(R[0].elements, 3);
    assert_int_equal(R[0].etype[0], REDIS_REPLY_STATUS);
    assert_int_equal(R[0].etype[1], REDIS_REPLY_INTEGER);
    assert_int_equal(R[0].eint[1], 2);
    assert_int_equal(R[0].etype[2], REDIS_REPLY_STRING);
    assert_string_equal(R[0].estr[2], "2");
    assert_int_equal(store_pending(st()), 0);
    pump(50);
    assert_int_equal(R[0].calls, 1);
}

static void test_script_and_noscript_recovery(void **state)
{
    (void)state;
    open_store("2000", "64");
    assert_int_equal(scripts_loaded(), LUA_SCRIPT_COUNT); /* loaded before ready */
    raw_cmd(NULL, 0, "HSET sc:e id e");
    raw_cmd(NULL, 0, "SADD sc:e:admins 0xb 0xa 0xc");

    admins_list(&R[0], "sc:e");
    WAIT_FOR(R[0].calls == 1, 2000);
    assert_int_equal(R[0].status, STORE_OK);
    assert_int_equal(R[0].type, REDIS_REPLY_ARRAY);
    assert_int_equal(R[0].elements, 3);
    assert_string_equal(R[0].estr[0], "0xa");
    assert_string_equal(R[0].estr[1], "0xb");
    assert_string_equal(R[0].estr[2], "0xc");
    admins_list(&R[1], "sc:none"); /* the script's own error */
    WAIT_FOR(R[1].calls == 1, 2000);
    assert_int_equal(R[1].status, STORE_OK);
    assert_int_equal(R[1].type, REDIS_REPLY_ERROR);
    assert_string_equal(R[1].str, "NOT_FOUND No such entity.");

    /* Redis forgets its scripts: EVALSHA gets NOSCRIPT, the store resends the source. */
    assert_int_equal(raw_cmd(NULL, 0, "SCRIPT FLUSH"), 1);
    assert_int_equal(scripts_loaded(), 0);
    raw_cmd(NULL, 0, "SADD sc:e:admins 0xd");
    admins_list(&R[2], "sc:e");
    WAIT_FOR(R[2].calls == 1, 2000);
    assert_int_equal(R[2].status, STORE_OK);
    assert_int_equal(R[2].type, REDIS_REPLY_ARRAY);
    assert_int_equal(R[2].elements, 4);
    assert_string_equal(R[2].estr[3], "0xd");
    assert_int_equal(store_pending(st()), 0);
    pump(50);
    assert_int_equal(R[0].calls + R[1].calls + R[2].calls, 3);

    /* Inside a transaction EVALSHA cannot be resent: the caller sees NOSCRIPT, and the store
     * loads every script again, so the next transaction runs. */
    assert_int_equal(raw_cmd(NULL, 0, "SCRIPT FLUSH"), 1);
    const char *sha = store_script_sha(st(), LUA_ADMINS_LIST);
    assert_string_equal(sha, lua_scripts[LUA_ADMINS_LIST].sha1);
    const char *ev[] = {"EVALSHA", sha, "3", "sc:e", "sc:e:owners", "sc:e:admins", "", "1"};
    size_t ev_l[8];
    for (int i = 0; i < 8; i++)
        ev_l[i] = strlen(ev[i]);
    const store_cmd tx[] = {{8, ev, ev_l}};
    store_exec(st(), on_rec, &R[3], 1, tx);
    WAIT_FOR(R[3].calls == 1, 2000);
    assert_int_equal(R[3].status, STORE_OK);
    assert_int_equal(R[3].type, REDIS_REPLY_ARRAY);
    assert_int_equal(R[3].etype[0], REDIS_REPLY_ERROR);
    assert_memory_equal(R[3].estr[0], "NOSCRIPT", 8);
    WAIT_FOR(scripts_loaded() == LUA_SCRIPT_COUNT, 2000);
    store_exec(st(), on_rec, &R[4], 1, tx);
    WAIT_FOR(R[4].calls == 1, 2000);
    assert_int_equal(R[4].type, REDIS_REPLY_ARRAY);
    assert_int_equal(R[4].etype[0], REDIS_REPLY_ARRAY);
    pump(50);
    assert_int_equal(R[3].calls + R[4].calls, 2);
}

static void test_deadline_answers_timeout_once(void **state)
{
    (void)state;
    open_store("200", "64");
    CMD(&R[0], "SET", "dl:k", "v");
    WAIT_FOR(R[0].calls == 1, 2000);

    raw_send_only("DEBUG SLEEP 1"); /* Redis answers nothing for a second */
    uint64_t slept = now_ns();
    /* Time for Redis, another process on a machine that may be loaded, to begin its sleep. */
    usleep(200000);
    uv_update_time(&T.loop);
    uint64_t t0 = now_ns();
    CMD(&R[1], "GET", "dl:k");
    assert_int_equal(R[1].calls, 0);
    pump(150);
    assert_int_equal(R[1].calls, 0); /* not before the deadline */
    WAIT_FOR(R[1].calls == 1, 1000);
    uint64_t took_ms = (R[1].at_ns - t0) / 1000000;
    /* The deadline (200 ms, checked every 20 ms) passed, and well before Redis woke, 800 ms
     * after t0, with its answer: the status below tells the two apart; the bound leaves the
     * rest for a loaded machine. */
    assert_true(took_ms >= 199);
    assert_true(took_ms < 750);
    assert_int_equal(R[1].status, STORE_TIMEOUT);
    assert_int_equal(store_get_stats(st())->timeouts, 1);
    assert_int_equal(store_pending(st()), 1); /* its reply is still owed */
    assert_true(store_ready(st()));

    /* Redis wakes and answers: the late reply is dropped, the callback not called again. */
    raw_finish();
    assert_true((now_ns() - slept) / 1000000 >= 900);
    WAIT_FOR(store_pending(st()) == 0, 2000);
    pump(50);
    assert_int_equal(R[1].calls, 1);
    assert_int_equal(R[1].status, STORE_TIMEOUT);
    /* The connection is still good. */
    CMD(&R[2], "GET", "dl:k");
    WAIT_FOR(R[2].calls == 1, 2000);
    assert_int_equal(R[2].status, STORE_OK);
    assert_string_equal(R[2].str, "v");
    assert_int_equal(store_get_stats(st())->disconnects, 0);
}

static void test_load_shedding(void **state)
{
    (void)state;
    open_store("5000", "8");
    raw_cmd(NULL, 0, "DEL shed:n");
    assert_int_equal(raw_cmd(NULL, 0, "CLIENT PAUSE 1000 ALL"), 1);
    const store_stats *s = store_get_stats(st());
    /* Requests leave the last 2 of the 8 to the service's upkeep (store_control). */
    for (int i = 0; i < 6; i++) {
        CMD(&R[i], "INCR", "shed:n");
        assert_int_equal(R[i].calls, 0);
        assert_int_equal(store_pending(st()), (size_t)i + 1);
    }
    uint64_t commands = s->commands;
    /* The seventh: refused at once, nothing sent. */
    CMD(&R[8], "INCR", "shed:n");
    assert_int_equal(R[8].calls, 1);
    assert_int_equal(R[8].status, STORE_UNAVAILABLE);
    assert_int_equal(store_pending(st()), 6);
    assert_int_equal(s->shed, 1);
    /* So are a transaction and a script. */
    const char *incr[] = {"INCR", "shed:n"};
    const size_t incr_l[] = {4, 6};
    const store_cmd tx[] = {{2, incr, incr_l}};
    store_exec(st(), on_rec, &R[9], 1, tx);
    assert_int_equal(R[9].calls, 1);
    assert_int_equal(R[9].status, STORE_UNAVAILABLE);
    admins_list(&R[10], "shed:e");
    assert_int_equal(R[10].calls, 1);
    assert_int_equal(R[10].status, STORE_UNAVAILABLE);
    assert_int_equal(s->shed, 3);
    assert_int_equal(s->commands, commands);
    assert_int_equal(store_pending(st()), 6);
    /* The upkeep has its two, then is refused at the cap like the rest. */
    for (int i = 6; i < 8; i++) {
        store_control(st(), on_rec, &R[i], 2, incr, incr_l);
        assert_int_equal(R[i].calls, 0);
    }
    assert_int_equal(store_pending(st()), 8);
    store_control(st(), on_rec, &R[12], 2, incr, incr_l);
    assert_int_equal(R[12].calls, 1);
    assert_int_equal(R[12].status, STORE_UNAVAILABLE);
    assert_int_equal(s->shed, 4);
    commands = s->commands;

    /* Redis is paused: nothing comes back for a while, and the cap holds. */
    pump(300);
    for (int i = 0; i < 8; i++)
        assert_int_equal(R[i].calls, 0);
    CMD(&R[11], "INCR", "shed:n");
    assert_int_equal(R[11].calls, 1);
    assert_int_equal(R[11].status, STORE_UNAVAILABLE);
    assert_true(store_pending(st()) <= 8);

    /* After the pause, everything sent is answered, once, in order. */
    WAIT_FOR(R[7].calls == 1, 3000);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(R[i].calls, 1);
        assert_int_equal(R[i].status, STORE_OK);
        assert_int_equal(R[i].type, REDIS_REPLY_INTEGER);
        assert_int_equal(R[i].integer, i + 1);
    }
    assert_int_equal(store_pending(st()), 0);
    char v[16] = "";
    raw_cmd(v, sizeof v, "GET shed:n");
    assert_string_equal(v, "8"); /* the refused ones never reached Redis */
    pump(50);
    for (int i = 0; i < 13; i++)
        assert_true(R[i].calls <= 1);
    /* Below the cap again: commands go. */
    CMD(&R[13], "INCR", "shed:n");
    WAIT_FOR(R[13].calls == 1, 2000);
    assert_int_equal(R[13].integer, 9);
}

static void test_reconnect_after_server_killed(void **state)
{
    (void)state;
    open_store("3000", "64");
    /* Commands on the wire, unanswered, when the server dies. */
    assert_int_equal(raw_cmd(NULL, 0, "CLIENT PAUSE 5000 ALL"), 1);
    CMD(&R[0], "SET", "rc:k", "1");
    CMD(&R[1], "GET", "rc:k");
    const char *get[] = {"GET", "rc:k"};
    const size_t get_l[] = {3, 4};
    const store_cmd tx[] = {{2, get, get_l}, {2, get, get_l}};
    store_exec(st(), on_rec, &R[2], 2, tx);
    admins_list(&R[3], "rc:e");
    pump(100);
    assert_int_equal(store_pending(st()), 7);
    for (int i = 0; i < 4; i++)
        assert_int_equal(R[i].calls, 0);
    raw_close();

    redis_kill9();
    WAIT_FOR(T.heard_gone == 1, 2000);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(R[i].calls, 1);
        assert_int_equal(R[i].status, STORE_UNAVAILABLE);
    }
    assert_false(store_ready(st()));
    assert_int_equal(store_pending(st()), 0);
    assert_int_equal(store_get_stats(st())->disconnects, 1);
    /* Down: answered at once. */
    CMD(&R[4], "GET", "rc:k");
    assert_int_equal(R[4].calls, 1);
    assert_int_equal(R[4].status, STORE_UNAVAILABLE);
    pump(600); /* a few refused attempts (at 50 and 150 ms, then 350: slack for load) */
    for (int i = 0; i < 5; i++)
        assert_int_equal(R[i].calls, 1);
    assert_false(store_ready(st()));
    uint64_t attempts = store_get_stats(st())->reconnects;
    assert_true(attempts >= 2);

    /* The server comes back on the same port: the store follows by itself. */
    assert_true(redis_start());
    assert_int_equal(scripts_loaded(), 0);
    WAIT_FOR(store_ready(st()), 10000);
    assert_int_equal(T.heard_ready, 2);
    assert_int_equal(T.heard_gone, 1);
    assert_true(store_get_stats(st())->reconnects > attempts);
    assert_int_equal(scripts_loaded(), LUA_SCRIPT_COUNT);
    raw_cmd(NULL, 0, "SADD rc:e:admins 0xa");
    raw_cmd(NULL, 0, "HSET rc:e id e");
    admins_list(&R[5], "rc:e");
    CMD(&R[6], "GET", "rc:k");
    WAIT_FOR(R[5].calls == 1 && R[6].calls == 1, 2000);
    assert_int_equal(R[5].status, STORE_OK);
    assert_int_equal(R[5].type, REDIS_REPLY_ARRAY);
    assert_int_equal(R[5].elements, 1);
    assert_string_equal(R[5].estr[0], "0xa");
    assert_int_equal(R[6].status, STORE_OK);
    assert_int_equal(R[6].type, REDIS_REPLY_NIL); /* a new, empty server */
    pump(50);
    for (int i = 0; i < 7; i++)
        assert_int_equal(R[i].calls, 1);
}

static void test_close_answers_pending_once(void **state)
{
    (void)state;
    open_store("3000", "64");
    assert_int_equal(raw_cmd(NULL, 0, "CLIENT PAUSE 1000 ALL"), 1);
    CMD(&R[0], "SET", "cl:k", "1");
    CMD(&R[1], "GET", "cl:k");
    const char *get[] = {"GET", "cl:k"};
    const size_t get_l[] = {3, 4};
    const store_cmd tx[] = {{2, get, get_l}};
    store_exec(st(), on_rec, &R[2], 1, tx);
    admins_list(&R[3], "cl:e");
    pump(100);
    for (int i = 0; i < 4; i++)
        assert_int_equal(R[i].calls, 0);
    assert_int_equal(store_pending(st()), 6);

    store_close(st());
    for (int i = 0; i < 4; i++) {
        assert_int_equal(R[i].calls, 1);
        assert_int_equal(R[i].status, STORE_UNAVAILABLE);
    }
    assert_int_equal(store_pending(st()), 0);
    assert_false(store_ready(st()));
    assert_int_equal(T.heard_gone, 1);
    /* Later callers: answered at once. */
    CMD(&R[4], "GET", "cl:k");
    store_exec(st(), on_rec, &R[5], 1, tx);
    admins_list(&R[6], "cl:e");
    assert_true(store_read(st(), 0, on_rec, &R[7], 2, get, get_l));
    for (int i = 4; i < 8; i++) {
        assert_int_equal(R[i].calls, 1);
        assert_int_equal(R[i].status, STORE_UNAVAILABLE);
    }
    /* No reconnect, and nothing answered twice, even after the pause ends. */
    store_close(st());
    pump(1200);
    for (int i = 0; i < 8; i++)
        assert_int_equal(R[i].calls, 1);
    assert_false(store_ready(st()));
    assert_int_equal(T.heard_ready, 1);
    assert_int_equal(T.heard_gone, 1);
}

static void test_listener_hears_connection_come_and_go(void **state)
{
    (void)state;
    open_store("2000", "64"); /* heard ready=true once, as the store turned ready */
    assert_int_equal(T.ready_unready, 0);
    /* The server drops the store's connection: the listener hears it go, then come back. A
     * command it sends as it hears it is refused at once, the store no longer ready. */
    T.send_when_gone = &R[2];
    assert_true(raw_cmd(NULL, 0, "CLIENT KILL TYPE normal SKIPME yes") >= 1);
    WAIT_FOR(T.heard_gone == 1, 2000);
    assert_int_equal(T.gone_ready, 0);
    assert_int_equal(R[2].calls, 1);
    assert_int_equal(R[2].status, STORE_UNAVAILABLE);
    assert_int_equal(T.heard_ready, 1);
    assert_false(store_ready(st()));
    CMD(&R[0], "PING");
    assert_int_equal(R[0].calls, 1);
    assert_int_equal(R[0].status, STORE_UNAVAILABLE);
    WAIT_FOR(store_ready(st()), 5000);
    assert_int_equal(T.heard_ready, 2);
    assert_int_equal(T.heard_gone, 1);
    assert_int_equal(T.ready_unready, 0);
    assert_int_equal(store_get_stats(st())->disconnects, 1);
    CMD(&R[1], "PING");
    WAIT_FOR(R[1].calls == 1, 2000);
    assert_int_equal(R[1].status, STORE_OK);
    assert_string_equal(R[1].str, "PONG");
    /* store_close: heard once more, and no reconnect after it. */
    store_close(st());
    assert_int_equal(T.heard_gone, 2);
    pump(200);
    assert_int_equal(T.heard_ready, 2);
    assert_int_equal(T.heard_gone, 2);
    assert_int_equal(R[0].calls + R[1].calls, 2);
}

/* --- script groups (group.h), with the award script, the one written for them --- */

/* An entity the award script takes: the caller "0xowner" owns it; members m0..m3; one skill
 * s1; no levels. */
static void seed_award_entity(const char *e)
{
    raw_cmd(NULL, 0, "DEL %s %s:owners %s:members %s:skills %s:contribs %s:events", e, e, e, e, e,
            e);
    raw_cmd(NULL, 0, "HSET %s id x isEnabled 1 progtpl %s", e, "");
    raw_cmd(NULL, 0, "SADD %s:owners 0xowner", e);
    raw_cmd(NULL, 0, "HSET %s:members m0 1 m1 1 m2 1 m3 1", e);
    raw_cmd(NULL, 0, "HSET %s:skills s1 1", e);
}

/* Queues one award of score 1 in s1 to member m of entity e, contribution id `id`. */
static void group_award(rec *r, const char *e, const char *m, const char *id)
{
    char keys[9][64], record[64];
    const char *suffix[] = {"",          ":owners",       ":admins",       ":members", ":skills",
                            ":contribs", ":skills:order", ":levels:order", ":lb:xp"};
    for (int i = 0; i < 9; i++)
        snprintf(keys[i], sizeof keys[i], "%s%s", e, suffix[i]);
    snprintf(record, sizeof record, "{\"id\":\"%s\"}", id);
    const char *argv[] = {keys[0],
                          keys[1],
                          keys[2],
                          keys[3],
                          keys[4],
                          keys[5],
                          keys[6],
                          keys[7],
                          keys[8],
                          "100",
                          "0",
                          "0xowner",
                          "0",
                          "1700000000000",
                          "2023-11-14T22:13:20.000Z", /* the shared part; no idempotency key */
                          "",
                          "1", /* one contribution: id, member, xp 0, one skill */
                          id,
                          m,
                          "0",
                          "1",
                          "s1",
                          "1",
                          record,
                          "{}"};
    size_t lens[sizeof argv / sizeof *argv];
    for (size_t i = 0; i < sizeof argv / sizeof *argv; i++)
        lens[i] = strlen(argv[i]);
    group_script(T.a.groups, LUA_CONTRIB_AWARD, on_rec, r, 9, 6, 0,
                 (int)(sizeof argv / sizeof *argv), argv, lens);
}

static long long evalsha_calls(void)
{
    redisReply *r = redisCommand(raw(), "INFO commandstats");
    assert_non_null(r);
    const char *at = strstr(r->str, "cmdstat_evalsha:calls=");
    long long n = at ? strtoll(at + 22, NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

static void open_groups(void)
{
    open_store("3000", "64");
    T.a.groups = group_new(&T.loop, st());
    assert_non_null(T.a.groups);
    seed_award_entity("ent:{g1}");
    seed_award_entity("ent:{g2}");
    raw_cmd(NULL, 0, "CONFIG RESETSTAT");
}

static void test_group_one_call_per_turn_each_its_own_answer(void **state)
{
    (void)state;
    open_groups();
    group_award(&R[0], "ent:{g1}", "m0", "k0");
    group_award(&R[1], "ent:{g1}", "nobody", "k1");
    group_award(&R[2], "ent:{g2}", "m1", "k2");
    group_award(&R[3], "ent:{g1}", "m2", "k3");
    /* Nothing is answered inside group_script, and nothing left before the check phase. */
    for (int i = 0; i < 4; i++)
        assert_int_equal(R[i].calls, 0);
    assert_int_equal(store_pending(st()), 0);
    WAIT_FOR(R[0].calls && R[1].calls && R[2].calls && R[3].calls, 3000);
    const char *ids[] = {"k0", NULL, "k2", "k3"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(R[i].calls, 1);
        assert_int_equal(R[i].status, STORE_OK);
        if (!ids[i]) {
            assert_int_equal(R[i].type, REDIS_REPLY_ERROR);
            assert_string_equal(R[i].str, "INVALID 0 member is not a member of this entity.");
            continue;
        }
        /* A fresh award is answered 'OK': the service has the records it sent. */
        assert_int_equal(R[i].type, REDIS_REPLY_STRING);
        assert_string_equal(R[i].str, "OK");
        char want[64];
        snprintf(want, sizeof want, "{\"id\":\"%s\"}", ids[i]);
        redisReply *h =
            redisCommand(raw(), "HGET %s:contribs %s", i == 2 ? "ent:{g2}" : "ent:{g1}", ids[i]);
        assert_non_null(h);
        assert_int_equal(h->type, REDIS_REPLY_STRING);
        assert_string_equal(h->str, want);
        freeReplyObject(h);
    }
    /* One call per entity; what each wrote is there, the refused award wrote nothing. */
    assert_int_equal(evalsha_calls(), 2);
    assert_int_equal(raw_cmd(NULL, 0, "HLEN ent:{g1}:contribs"), 2);
    assert_int_equal(raw_cmd(NULL, 0, "HLEN ent:{g2}:contribs"), 1);
    assert_int_equal(raw_cmd(NULL, 0, "XLEN ent:{g1}:events"), 2);
}

static void test_group_full_opens_another(void **state)
{
    (void)state;
    open_groups();
    char ids[GROUP_MAX_CALLS + 1][16];
    for (int i = 0; i <= GROUP_MAX_CALLS; i++) {
        snprintf(ids[i], sizeof ids[i], "f%d", i);
        group_award(&R[i], "ent:{g1}", "m3", ids[i]);
    }
    bool all = false;
    uint64_t end = now_msec() + 3000;
    while (!all && pump_step(end)) {
        all = true;
        for (int i = 0; i <= GROUP_MAX_CALLS; i++)
            all = all && R[i].calls == 1;
    }
    assert_true(all);
    for (int i = 0; i <= GROUP_MAX_CALLS; i++)
        assert_string_equal(R[i].str, "OK");
    assert_int_equal(evalsha_calls(), 2);
    char score[32] = "";
    raw_cmd(score, sizeof score, "HGET ent:{g1}:prog:m3 s:s1");
    assert_int_equal(atoi(score), GROUP_MAX_CALLS + 1);
}

static void test_group_now_is_one_reading_per_turn(void **state)
{
    (void)state;
    open_groups();
    int64_t first = group_now_ms(T.a.groups);
    usleep(5000);
    /* Later in the same turn: the same reading, so the turn's calls can share their time. */
    assert_int_equal(group_now_ms(T.a.groups), first);
    /* The check phase ends the turn (no call was queued): the next turn reads the clock. */
    uv_run(&T.loop, UV_RUN_NOWAIT);
    int64_t next = group_now_ms(T.a.groups);
    assert_true(next >= first + 5);
    assert_int_equal(group_now_ms(T.a.groups), next);
    /* A closed group has no turn: each call reads the clock. */
    group_close(T.a.groups);
    usleep(2000);
    assert_true(group_now_ms(T.a.groups) >= next + 2);
}

/* A command or award queued by a timer (the sweeper's and the erasure's steps, a lease's renewal)
 * leaves in the same loop turn. The write happens in the check phase, after the poll: if the
 * poll blocked until its next timer (the store's tick, 20 ms), every such step would wait that
 * long on a quiet loop. What the loop is about to do is read where it decides: the poll's
 * timeout, which must be 0 once something is queued. */
static struct {
    uv_timer_t timer;
    int what; /* 0: a command to the store; 1: an award to a group */
    int timeout_before, timeout_after;
    int attempt;
} TQ;

static void on_queue_timer(uv_timer_t *t)
{
    (void)t;
    char id[16];
    snprintf(id, sizeof id, "t%d", TQ.attempt);
    TQ.timeout_before = uv_backend_timeout(&T.loop);
    if (TQ.what == 0)
        CMD(&R[0], "INCR", "timer:sent");
    else
        group_award(&R[0], "ent:{g1}", "m0", id);
    TQ.timeout_after = uv_backend_timeout(&T.loop);
}

/* The measurement says something only when nothing else was due as the timer ran: on a loaded
 * machine the 1 ms timer can run so late that the store's tick (or a connection's callback) is
 * due beside it, and then the poll would not block either way. Such a turn is measured again,
 * a bounded number of times; the queued call must clear the poll's timeout in every one. */
static void queue_from_timer(int what)
{
    TQ.what = what;
    for (TQ.attempt = 0; TQ.attempt < 8; TQ.attempt++) {
        memset(&R[0], 0, sizeof R[0]);
        TQ.timeout_before = TQ.timeout_after = -2;
        uv_timer_init(&T.loop, &TQ.timer);
        uv_timer_start(&TQ.timer, on_queue_timer, 1, 0);
        WAIT_FOR(R[0].calls == 1, 3000);
        uv_close((uv_handle_t *)&TQ.timer, NULL);
        uv_run(&T.loop, UV_RUN_NOWAIT); /* the close completes before the timer is used again */
        assert_int_equal(R[0].status, STORE_OK);
        assert_int_equal(TQ.timeout_after, 0);
        if (TQ.timeout_before != 0)
            break;
    }
    /* Nothing else was due, so the poll would have blocked: for the store's tick once the
     * command is in flight (20 ms), or without end before it. */
    assert_true(TQ.timeout_before != 0);
}

static void test_command_queued_by_timer_does_not_wait_for_poll(void **state)
{
    (void)state;
    open_store("2000", "64");
    queue_from_timer(0);
    assert_int_equal(R[0].type, REDIS_REPLY_INTEGER);
    assert_int_equal(raw_cmd(NULL, 0, "GET timer:sent") > 0, 1);
    /* Once sent, nothing keeps the poll from blocking: no busy loop while waiting. */
    pump(30);
    assert_true(uv_backend_timeout(&T.loop) != 0);
}

static void test_group_award_queued_by_timer_does_not_wait_for_poll(void **state)
{
    (void)state;
    open_groups();
    queue_from_timer(1);
    assert_int_equal(R[0].type, REDIS_REPLY_STRING);
    assert_string_equal(R[0].str, "OK");
    /* One script call per measured turn: the award left alone in its turn each time. */
    assert_int_equal(evalsha_calls(), TQ.attempt + 1);
    pump(30);
    assert_true(uv_backend_timeout(&T.loop) != 0);
}

static void test_group_closed_store_answers_each_call_once(void **state)
{
    (void)state;
    open_groups();
    group_award(&R[0], "ent:{g1}", "m0", "c0");
    group_award(&R[1], "ent:{g1}", "m1", "c1");
    store_close(st());
    /* Closing the group sends what it holds: the closed store answers each call. */
    group_close(T.a.groups);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(R[i].calls, 1);
        assert_int_equal(R[i].status, STORE_UNAVAILABLE);
    }
    /* A call after the group closed leaves alone, at once. */
    group_award(&R[2], "ent:{g1}", "m2", "c2");
    assert_int_equal(R[2].calls, 1);
    assert_int_equal(R[2].status, STORE_UNAVAILABLE);
    pump(100);
    for (int i = 0; i < 3; i++)
        assert_int_equal(R[i].calls, 1);
    assert_int_equal(raw_cmd(NULL, 0, "HLEN ent:{g1}:contribs"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_command_round_trip, teardown),
        cmocka_unit_test_teardown(test_exec_transaction, teardown),
        cmocka_unit_test_teardown(test_script_and_noscript_recovery, teardown),
        cmocka_unit_test_teardown(test_deadline_answers_timeout_once, teardown),
        cmocka_unit_test_teardown(test_load_shedding, teardown),
        cmocka_unit_test_teardown(test_reconnect_after_server_killed, teardown),
        cmocka_unit_test_teardown(test_close_answers_pending_once, teardown),
        cmocka_unit_test_teardown(test_listener_hears_connection_come_and_go, teardown),
        cmocka_unit_test_teardown(test_group_one_call_per_turn_each_its_own_answer, teardown),
        cmocka_unit_test_teardown(test_group_full_opens_another, teardown),
        cmocka_unit_test_teardown(test_group_now_is_one_reading_per_turn, teardown),
        cmocka_unit_test_teardown(test_group_closed_store_answers_each_call_once, teardown),
        cmocka_unit_test_teardown(test_command_queued_by_timer_does_not_wait_for_poll, teardown),
        cmocka_unit_test_teardown(test_group_award_queued_by_timer_does_not_wait_for_poll,
                                  teardown),
    };
    log_set_level(LOG_WARN);
    return redis_tests_result(
        cmocka_run_group_tests(tests, redis_group_setup, redis_group_teardown));
}
