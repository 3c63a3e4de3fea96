/* The entityd-sign CLI, run as a process, against ethers' signatures. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

static json_t *g_fixture;
static const char *g_exe;
static char g_dir[] = "/tmp/entityd-sign-test-XXXXXX";

/* Runs "exe args" through the shell; stores stdout (NUL-terminated) in out and returns the exit
 * status, or -1 if the process did not exit normally. */
static int run(const char *args, char *out, size_t cap)
{
    char cmd[4096];
    FILE *p;
    size_t n;
    int st;

    assert_true((size_t)snprintf(cmd, sizeof(cmd), "'%s' %s 2>/dev/null", g_exe, args) <
                sizeof(cmd));
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void test_signs_like_ethers(void **state)
{
    json_t *sigs = fixture_array(g_fixture, "signatures"), *v;
    size_t i;

    json_array_foreach(sigs, i, v)
    {
        char path[64], args[256], out[1024], expect[512];
        size_t len;
        uint8_t *msg = fixture_hex(fixture_str(v, "message_hex"), &len);

        snprintf(path, sizeof(path), "%s/msg", g_dir);
        write_file(path, msg, len);
        free(msg);
        assert_int_equal(setenv("ENTITYD_SIGN_KEY", fixture_str(v, "private_key"), 1), 0);

        snprintf(args, sizeof(args), "--message-file '%s'", path);
        assert_int_equal(run(args, out, sizeof(out)), 0);
        snprintf(expect, sizeof(expect), "address=%s&signature=%s\n", fixture_str(v, "address"),
                 fixture_str(v, "signature"));
        assert_string_equal(out, expect);

        snprintf(args, sizeof(args), "--compact --message - < '%s'", path);
        assert_int_equal(run(args, out, sizeof(out)), 0);
        snprintf(expect, sizeof(expect), "address=%s&signature=%s\n", fixture_str(v, "address"),
                 fixture_str(v, "compact"));
        assert_string_equal(out, expect);

        snprintf(args, sizeof(args), "--v01 --message-file='%s'", path);
        assert_int_equal(run(args, out, sizeof(out)), 0);
        snprintf(expect, sizeof(expect), "address=%s&signature=%s\n", fixture_str(v, "address"),
                 fixture_str(v, "signature_v01"));
        assert_string_equal(out, expect);
    }
    unsetenv("ENTITYD_SIGN_KEY");
}

static void test_key_file_signs_with_each_key(void **state)
{
    json_t *sigs = fixture_array(g_fixture, "signatures");
    /* Vector 2 signs "hello": sign that message with three keys, expecting vector 2's line for
     * its own key. */
    json_t *hello = json_array_get(sigs, 2);
    char keys[512], path[64], args[256], out[2048], expect[512];

    assert_string_equal(fixture_str(hello, "message"), "hello");
    snprintf(keys, sizeof(keys), "# fixture keys\n%s\n\n  %s  \r\n%s\n",
             fixture_str(json_array_get(sigs, 0), "private_key"), fixture_str(hello, "private_key"),
             fixture_str(json_array_get(sigs, 1), "private_key") + 2);
    snprintf(path, sizeof(path), "%s/keys", g_dir);
    write_file(path, keys, strlen(keys));

    snprintf(args, sizeof(args), "--key-file '%s' --message hello", path);
    assert_int_equal(run(args, out, sizeof(out)), 0);
    char *line2 = strchr(out, '\n');
    assert_non_null(line2);
    snprintf(expect, sizeof(expect), "address=%s&signature=%s\n", fixture_str(hello, "address"),
             fixture_str(hello, "signature"));
    assert_int_equal(strncmp(line2 + 1, expect, strlen(expect)), 0);
    assert_non_null(strchr(line2 + 1 + strlen(expect) - 1, '\n'));

    snprintf(args, sizeof(args), "--key-file '%s' --address-only", path);
    assert_int_equal(run(args, out, sizeof(out)), 0);
    snprintf(expect, sizeof(expect), "%s\n%s\n%s\n",
             fixture_str(json_array_get(sigs, 0), "address"), fixture_str(hello, "address"),
             fixture_str(json_array_get(sigs, 1), "address"));
    assert_string_equal(out, expect);
}

static void test_random_keys_out_round_trip(void **state)
{
    char path[64], args[256], first[4096], second[4096];

    snprintf(path, sizeof(path), "%s/random", g_dir);
    snprintf(args, sizeof(args), "--random 5 --keys-out '%s' --message abc", path);
    assert_int_equal(run(args, first, sizeof(first)), 0);
    snprintf(args, sizeof(args), "--key-file '%s' --message abc", path);
    assert_int_equal(run(args, second, sizeof(second)), 0);
    assert_string_equal(first, second);
    assert_int_equal(access(path, R_OK), 0);
}

static void test_usage_and_failures(void **state)
{
    const char *key =
        fixture_str(json_array_get(fixture_array(g_fixture, "signatures"), 0), "private_key");
    char args[256], out[256];

    unsetenv("ENTITYD_SIGN_KEY");
    assert_int_equal(run("--message x", out, sizeof(out)), 1);
    snprintf(args, sizeof(args), "%s --message x", key);
    assert_int_equal(run(args, out, sizeof(out)), 2);
    assert_int_equal(run("--random 1", out, sizeof(out)), 2);
    assert_int_equal(run("--random 1 --message a --url http://127.0.0.1:1", out, sizeof(out)), 2);
    assert_int_equal(run("--random 1 --compact --v01 --message a", out, sizeof(out)), 2);
    assert_int_equal(run("--random 0 --message a", out, sizeof(out)), 2);
    assert_int_equal(run("--keys-out /dev/null --message a", out, sizeof(out)), 2);
    assert_int_equal(run("--bogus", out, sizeof(out)), 2);
    assert_int_equal(run("--help", out, sizeof(out)), 0);
    assert_non_null(strstr(out, "Usage"));
    assert_int_equal(setenv("ENTITYD_SIGN_KEY", "0x1234", 1), 0);
    assert_int_equal(run("--message x", out, sizeof(out)), 1);
    unsetenv("ENTITYD_SIGN_KEY");
}

static int teardown(void **state)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signs_like_ethers),
        cmocka_unit_test(test_key_file_signs_with_each_key),
        cmocka_unit_test(test_random_keys_out_round_trip),
        cmocka_unit_test(test_usage_and_failures),
    };
    int rc;

    g_fixture = fixture_load(argc, argv);
    if (argc < 3) {
        fprintf(stderr, "usage: %s eth_vectors.json PATH/entityd-sign\n", argv[0]);
        return 2;
    }
    g_exe = argv[2];
    if (mkdtemp(g_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, teardown);
    json_decref(g_fixture);
    return rc;
}
