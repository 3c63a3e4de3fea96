/* config: defaults, environment, flags (which win), validation messages, --help and --version. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"

/* Settings the help test below expects --help to name (each test starts from the defaults:
 * setup unsets every variable of the table, config_env_name). */
static const char *const g_vars[] = {
    "PORT",
    "HOST",
    "REDIS_URL",
    "REDIS_TIMEOUT_MS",
    "AUTH_SECRET",
    "AUTH_DOMAIN",
    "AUTH_EPOCH_SECONDS",
    "PLATFORM_ADMINS",
    "ENTITY_CREATION",
    "MAX_BODY_BYTES",
    "LOG_LEVEL",
    "MAX_CONNECTIONS",
    "HEADER_TIMEOUT_MS",
    "IDLE_TIMEOUT_MS",
    "WRITE_TIMEOUT_MS",
    "WRITE_BUFFER_BYTES",
    "REDIS_MAX_PENDING",
    "LOG_BUFFER_BYTES",
    "SHUTDOWN_TIMEOUT_MS",
    "SIG_CACHE_SIZE",
    "EVENTS_MAX",
    "REDIS_CLUSTER_NODES",
    "REDIS_USERNAME",
    "REDIS_PASSWORD",
    "REDIS_SENTINELS",
    "REDIS_SENTINEL_MASTER",
    "DEV",
};

typedef struct fixture {
    config cfg;
    char err[512];
} fixture;

static int setup(void **state)
{
    static fixture f;

    for (size_t i = 0; config_env_name(i); i++)
        unsetenv(config_env_name(i));
    memset(&f, 0, sizeof f);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    config_free(&f->cfg);
    for (size_t i = 0; config_env_name(i); i++)
        unsetenv(config_env_name(i));
    return 0;
}

/* Loads with argv = {"entityd", args..., NULL}; frees any previous load first. */
#define LOAD(f, ...) load_argv((f), (const char *[]){"entityd", __VA_ARGS__, NULL})
#define LOAD0(f)     load_argv((f), (const char *[]){"entityd", NULL})

static int load_argv(fixture *f, const char **args)
{
    int argc = 0;

    while (args[argc])
        argc++;
    config_free(&f->cfg);
    f->err[0] = '\0';
    return config_load(&f->cfg, argc, (char **)args, f->err, sizeof f->err);
}

/* The load fails as invalid and its message names `what`. */
static void assert_invalid(fixture *f, int rc, const char *what)
{
    assert_int_equal(rc, CONFIG_EINVALID);
    if (strstr(f->err, what) == NULL)
        fail_msg("message \"%s\" does not name %s", f->err, what);
}

static void test_defaults(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "s3cret", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    assert_int_equal(f->cfg.port, 8080);
    assert_string_equal(f->cfg.host, "0.0.0.0");
    assert_string_equal(f->cfg.redis_url, "redis://127.0.0.1:6379/0");
    assert_int_equal(f->cfg.redis_timeout_ms, 2000);
    assert_string_equal(f->cfg.auth_secret, "s3cret");
    assert_string_equal(f->cfg.auth_domain, "entityd.local");
    assert_int_equal(f->cfg.auth_epoch_seconds, 86400);
    assert_string_equal(f->cfg.platform_admins, "");
    assert_string_equal(f->cfg.entity_creation, "open");
    assert_int_equal(f->cfg.max_body_bytes, 1048576);
    assert_string_equal(f->cfg.log_level, "info");
    assert_true(f->cfg.max_connections > 0);
    assert_true(f->cfg.header_timeout_ms > 0);
    assert_true(f->cfg.idle_timeout_ms > 0);
    assert_int_equal(f->cfg.shutdown_timeout_ms, 10000);
    assert_true(f->cfg.sig_cache_size > 0);
    assert_int_equal(f->cfg.events_max, 100000);
    assert_false(f->cfg.dev);
}

static void test_env_overrides(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    setenv("PORT", "9090", 1);
    setenv("HOST", "127.0.0.1", 1);
    setenv("REDIS_URL", "redis://:pw@db:6380/2", 1);
    setenv("REDIS_TIMEOUT_MS", "150", 1);
    setenv("AUTH_DOMAIN", "example.org", 1);
    setenv("AUTH_EPOCH_SECONDS", "60", 1);
    setenv("PLATFORM_ADMINS", "0xabc,0xdef", 1);
    setenv("ENTITY_CREATION", "platform", 1);
    setenv("MAX_BODY_BYTES", "10", 1);
    setenv("LOG_LEVEL", "debug", 1);
    setenv("SIG_CACHE_SIZE", "0", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    assert_int_equal(f->cfg.port, 9090);
    assert_string_equal(f->cfg.host, "127.0.0.1");
    assert_string_equal(f->cfg.redis_url, "redis://:pw@db:6380/2");
    assert_int_equal(f->cfg.redis_timeout_ms, 150);
    assert_string_equal(f->cfg.auth_secret, "k");
    assert_string_equal(f->cfg.auth_domain, "example.org");
    assert_int_equal(f->cfg.auth_epoch_seconds, 60);
    assert_string_equal(f->cfg.platform_admins, "0xabc,0xdef");
    assert_string_equal(f->cfg.entity_creation, "platform");
    assert_int_equal(f->cfg.max_body_bytes, 10);
    assert_string_equal(f->cfg.log_level, "debug");
    assert_int_equal(f->cfg.sig_cache_size, 0);
    assert_false(f->cfg.dev);
}

static void test_flags_override_env(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    setenv("PORT", "9090", 1);
    setenv("LOG_LEVEL", "debug", 1);

    assert_int_equal(LOAD(f, "--port", "9"), CONFIG_OK);
    assert_int_equal(f->cfg.port, 9);
    assert_string_equal(f->cfg.log_level, "debug");

    assert_int_equal(LOAD(f, "--port=9"), CONFIG_OK);
    assert_int_equal(f->cfg.port, 9);

    assert_int_equal(LOAD(f, "--log-level=warn", "--host", "::1", "--redis-timeout-ms", "5"),
                     CONFIG_OK);
    assert_string_equal(f->cfg.log_level, "warn");
    assert_string_equal(f->cfg.host, "::1");
    assert_int_equal(f->cfg.redis_timeout_ms, 5);
    assert_int_equal(f->cfg.port, 9090);

    assert_int_equal(LOAD(f, "--auth-secret", "from-flag"), CONFIG_OK);
    assert_string_equal(f->cfg.auth_secret, "from-flag");
}

static void test_last_flag_wins(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    assert_int_equal(LOAD(f, "--port", "1", "--port=2"), CONFIG_OK);
    assert_int_equal(f->cfg.port, 2);
    assert_int_equal(LOAD(f, "--host=a", "--host", "b"), CONFIG_OK);
    assert_string_equal(f->cfg.host, "b");
}

static void test_flag_value_may_hold_equals(void **state)
{
    fixture *f = *state;

    assert_int_equal(LOAD(f, "--auth-secret=a=b=c"), CONFIG_OK);
    assert_string_equal(f->cfg.auth_secret, "a=b=c");
}

static void test_port_bounds(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    setenv("PORT", "0", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    assert_int_equal(f->cfg.port, 0);
    setenv("PORT", "65535", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    assert_int_equal(f->cfg.port, 65535);
}

static void test_bad_integers(void **state)
{
    static const char *const bad[] = {
        "70000", "65536", "-1", "abc", "", "12abc", "1.5", "0x10", "99999999999999999999999",
    };
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("PORT", bad[i], 1);
        int rc = LOAD0(f);
        if (rc != CONFIG_EINVALID)
            fail_msg("PORT=\"%s\": expected CONFIG_EINVALID, got %d", bad[i], rc);
        assert_invalid(f, rc, "PORT");
    }
    unsetenv("PORT");
    assert_invalid(f, LOAD(f, "--port=70000"), "PORT");
    assert_invalid(f, LOAD(f, "--port", "x"), "PORT");

    setenv("REDIS_TIMEOUT_MS", "0", 1);
    assert_invalid(f, LOAD0(f), "REDIS_TIMEOUT_MS");
    unsetenv("REDIS_TIMEOUT_MS");
    setenv("MAX_BODY_BYTES", "-5", 1);
    assert_invalid(f, LOAD0(f), "MAX_BODY_BYTES");
}

static void test_bad_entity_creation(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    setenv("ENTITY_CREATION", "closed", 1);
    assert_invalid(f, LOAD0(f), "ENTITY_CREATION");
    unsetenv("ENTITY_CREATION");
    assert_invalid(f, LOAD(f, "--entity-creation", "OPEN"), "ENTITY_CREATION");
}

static void test_bad_log_level(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    setenv("LOG_LEVEL", "verbose", 1);
    assert_invalid(f, LOAD0(f), "LOG_LEVEL");
    unsetenv("LOG_LEVEL");
    assert_invalid(f, LOAD(f, "--log-level="), "LOG_LEVEL");
    for (const char *const *l = (const char *const[]){"debug", "info", "warn", "error", NULL}; *l;
         l++) {
        setenv("LOG_LEVEL", *l, 1);
        assert_int_equal(LOAD0(f), CONFIG_OK);
        assert_string_equal(f->cfg.log_level, *l);
    }
}

static void test_bad_bool(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    setenv("DEV", "maybe", 1);
    assert_invalid(f, LOAD0(f), "DEV");
}

static void test_unknown_flag(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    assert_invalid(f, LOAD(f, "--nope"), "--nope");
    assert_invalid(f, LOAD(f, "--port9"), "--port9");
    assert_invalid(f, LOAD(f, "--PORT=9"), "--PORT");
    /* A plain argument is not a flag. */
    assert_invalid(f, LOAD(f, "serve"), "serve");
}

static void test_missing_value(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    assert_invalid(f, LOAD(f, "--port"), "--port");
    assert_invalid(f, LOAD(f, "--dev", "--host"), "--host");
}

static void test_auth_secret_required(void **state)
{
    fixture *f = *state;

    assert_invalid(f, LOAD0(f), "AUTH_SECRET");
    setenv("AUTH_SECRET", "", 1);
    assert_invalid(f, LOAD0(f), "AUTH_SECRET");
    assert_invalid(f, LOAD(f, "--dev=false"), "AUTH_SECRET");
    assert_invalid(f, LOAD(f, "--port", "1"), "AUTH_SECRET");
}

static void test_dev_waives_auth_secret(void **state)
{
    fixture *f = *state;

    assert_int_equal(LOAD(f, "--dev"), CONFIG_OK);
    assert_true(f->cfg.dev);

    /* A bare boolean flag does not eat the next argument. */
    assert_int_equal(LOAD(f, "--dev", "--port", "5"), CONFIG_OK);
    assert_true(f->cfg.dev);
    assert_int_equal(f->cfg.port, 5);

    assert_int_equal(LOAD(f, "--dev=true"), CONFIG_OK);
    assert_true(f->cfg.dev);

    setenv("DEV", "1", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    assert_true(f->cfg.dev);
}

static void test_help_and_version_exit_ok(void **state)
{
    fixture *f = *state;

    /* Asked for even without AUTH_SECRET, and before any later bad flag. */
    assert_int_equal(LOAD(f, "--help"), CONFIG_EXIT_OK);
    assert_int_equal(LOAD(f, "-h"), CONFIG_EXIT_OK);
    assert_int_equal(LOAD(f, "--version"), CONFIG_EXIT_OK);
    assert_int_equal(LOAD(f, "--version", "--nope"), CONFIG_EXIT_OK);
    fflush(stdout);
}

static void test_help_lists_every_setting(void **state)
{
    static const char *const flags[] = {
        "--port",
        "--host",
        "--redis-url",
        "--redis-timeout-ms",
        "--auth-secret",
        "--auth-domain",
        "--auth-epoch-seconds",
        "--platform-admins",
        "--entity-creation",
        "--max-body-bytes",
        "--log-level",
        "--dev",
    };
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    assert_non_null(out);
    config_print_help(out);
    assert_int_equal(fclose(out), 0);
    assert_non_null(text);
    for (size_t i = 0; i < sizeof g_vars / sizeof g_vars[0]; i++)
        if (!strstr(text, g_vars[i]))
            fail_msg("--help does not mention %s", g_vars[i]);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strstr(text, flags[i]))
            fail_msg("--help does not mention %s", flags[i]);
    free(text);
}

static void test_free_is_idempotent(void **state)
{
    fixture *f = *state;

    setenv("AUTH_SECRET", "k", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    config_free(&f->cfg);
    assert_null(f->cfg.host);
    assert_null(f->cfg.auth_secret);
    config_free(&f->cfg);
}

/* ETH_RPC_URLS and ETH_RPC_URL as join rules' chains: a list parsed, AUTH_CHAIN_ID's URL
 * merged when both name it alike, and every malformed list refused without echoing a URL. */
static void test_rpc_urls(void **state)
{
    fixture *f = *state;
    config_rpc_url u[CONFIG_RPC_URLS_MAX];

    setenv("AUTH_SECRET", "k", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    assert_int_equal(config_rpc_urls(&f->cfg, u, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.join_rpc_max_per_second, 20);
    assert_string_equal(f->cfg.multicall3_address, "0xcA11bde05977b3631167028862bE2a173976CA11");

    setenv("ETH_RPC_URLS", "137=https://p.example/k,1=http://127.0.0.1:8545", 1);
    setenv("ETH_RPC_URL", "http://127.0.0.1:8545", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    assert_int_equal(config_rpc_urls(&f->cfg, u, f->err, sizeof f->err), 2);
    assert_int_equal(u[0].chain, 137);
    assert_int_equal(u[0].len, strlen("https://p.example/k"));
    assert_memory_equal(u[0].url, "https://p.example/k", u[0].len);
    assert_int_equal(u[1].chain, 1);
    assert_memory_equal(u[1].url, "http://127.0.0.1:8545", u[1].len);

    /* ETH_RPC_URL alone is AUTH_CHAIN_ID's. */
    unsetenv("ETH_RPC_URLS");
    setenv("AUTH_CHAIN_ID", "1337", 1);
    assert_int_equal(LOAD0(f), CONFIG_OK);
    assert_int_equal(config_rpc_urls(&f->cfg, u, f->err, sizeof f->err), 1);
    assert_int_equal(u[0].chain, 1337);

    /* Both naming AUTH_CHAIN_ID, with different URLs: refused at start. */
    setenv("ETH_RPC_URLS", "1337=http://127.0.0.1:9545", 1);
    assert_invalid(f, LOAD0(f), "AUTH_CHAIN_ID");
    assert_null(strstr(f->err, "127.0.0.1"));

    unsetenv("ETH_RPC_URL");
    static const char *const bad[] = {
        "1=",
        "=http://a",
        "0=http://a",
        "x=http://a",
        "1=ftp://a",
        "1=http://a,",
        ",1=http://a",
        "1 =http://a",
        "1=http://a,,2=http://b",
        "1http://a",
        "-1=http://a",
        "1=http://",
        "99999999999999999999=http://a",
        "1=http://a,1=http://a",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("ETH_RPC_URLS", bad[i], 1);
        assert_invalid(f, LOAD0(f), "ETH_RPC_URLS");
        assert_null(strstr(f->err, "http://a"));
    }
    setenv("ETH_RPC_URLS",
           "1=http://a,2=http://a,3=http://a,4=http://a,5=http://a,"
           "6=http://a,7=http://a,8=http://a,9=http://a",
           1);
    assert_invalid(f, LOAD0(f), "more than 8");
    unsetenv("ETH_RPC_URLS");
    setenv("MULTICALL3_ADDRESS", "0x1234", 1);
    assert_invalid(f, LOAD0(f), "MULTICALL3_ADDRESS");
    setenv("MULTICALL3_ADDRESS", "0x5FbDB2315678afecb367f032d93F642f64180aa3", 1);
    setenv("JOIN_RPC_MAX_PER_SECOND", "0", 1);
    assert_invalid(f, LOAD0(f), "JOIN_RPC_MAX_PER_SECOND");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_overrides, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flags_override_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_last_flag_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_value_may_hold_equals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_port_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_integers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_entity_creation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_log_level, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_bool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_secret_required, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dev_waives_auth_secret, setup, teardown),
        cmocka_unit_test_setup_teardown(test_help_and_version_exit_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_help_lists_every_setting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_is_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_urls, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
