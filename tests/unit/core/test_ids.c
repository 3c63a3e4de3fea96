/* ids: fresh ids are valid UUIDv4 ids, never repeat, and a forked child draws bytes of its own. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/ids.h"

#define MANY 2000 /* several pools' worth */

static int cmp_id(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void fresh_ids_are_valid_and_distinct(void **state)
{
    (void)state;
    char(*ids)[IDS_SIZE] = calloc(MANY, IDS_SIZE);
    assert_non_null(ids);
    for (size_t i = 0; i < MANY; i++) {
        char prefix = "csk"[i % 3];
        assert_int_equal(ids_new(ids[i], prefix), 0);
        assert_int_equal(strlen(ids[i]), IDS_SIZE - 1);
        assert_true(ids_valid(ids[i], strlen(ids[i]), prefix));
        ids[i][0] = 'c'; /* distinct whatever the prefix */
    }
    qsort(ids, MANY, IDS_SIZE, cmp_id);
    for (size_t i = 1; i < MANY; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    free(ids);
}

/* ids_valid takes exactly prefix-, lowercase hex in the 8-4-4-4-12 shape, version 4 and the
 * RFC 4122 variant. */
static void ids_valid_is_strict(void **state)
{
    (void)state;
    const char *good = "s-0b6e2f1c-3d4a-4b5c-8d6e-7f8091a2b3c4";
    assert_true(ids_valid(good, strlen(good), 's'));
    assert_false(ids_valid(good, strlen(good), 'c'));
    assert_false(ids_valid(good, strlen(good) - 1, 's'));
    const struct {
        size_t at;
        char ch;
    } edits[] = {
        {1, '_'},  {2, 'A'},  {2, 'g'},  {2, '-'},  {10, '0'}, {15, '0'},  {20, 'a'},
        {25, '1'}, {37, 'F'}, {16, '3'}, {21, 'c'}, {21, '7'}, {30, '\0'}, {5, '/'},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char id[IDS_SIZE];
        memcpy(id, good, IDS_SIZE);
        id[edits[i].at] = edits[i].ch;
        assert_false(ids_valid(id, IDS_SIZE - 1, 's'));
    }
    const char *variants = "89ab";
    for (int i = 0; i < 4; i++) {
        char id[IDS_SIZE];
        memcpy(id, good, IDS_SIZE);
        id[21] = variants[i];
        assert_true(ids_valid(id, IDS_SIZE - 1, 's'));
    }
}

/* The parent's pool is not the child's: the next id differs on both sides of a fork. */
static void a_fork_does_not_share_the_pool(void **state)
{
    (void)state;
    char first[IDS_SIZE], parent[IDS_SIZE], child[IDS_SIZE];
    assert_int_equal(ids_new(first, 'c'), 0); /* the pool is filled */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char id[IDS_SIZE];
        int ok = ids_new(id, 'c') == 0 && write(fds[1], id, IDS_SIZE) == IDS_SIZE;
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], child, IDS_SIZE), IDS_SIZE);
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(ids_new(parent, 'c'), 0);
    assert_true(ids_valid(child, strlen(child), 'c'));
    assert_string_not_equal(parent, child);
    assert_string_not_equal(first, child);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fresh_ids_are_valid_and_distinct),
        cmocka_unit_test(ids_valid_is_strict),
        cmocka_unit_test(a_fork_does_not_share_the_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
