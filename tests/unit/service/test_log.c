/* log: the bounded, non-blocking output buffer, against a pipe nobody reads, a regular file
 * and a pipe whose reader is gone. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

#define LINES 20000

static const char detail[] = "0123456789012345678901234567890123456789012345678901234567890123";

/* Reads what the pipe holds without blocking; returns the number of lines, checking that each
 * is a whole log line. */
static size_t drain(int fd, char *carry, size_t *carry_len)
{
    size_t lines = 0;
    char chunk[65536];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            assert_true(*carry_len < 4096);
            carry[(*carry_len)++] = chunk[i];
            if (chunk[i] != '\n')
                continue;
            assert_true(*carry_len > 20);
            assert_memory_equal(carry, "{\"time\":\"", 9);
            assert_memory_equal(carry + *carry_len - 2, "}\n", 2);
            *carry_len = 0;
            lines++;
        }
    }
    return lines;
}

static void test_stalled_pipe_bounds_and_drops(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    log_set_level(LOG_INFO);
    log_init(NULL, p[1], 8192);
    uint64_t before = log_dropped_lines();
    for (int i = 0; i < LINES; i++) {
        log_event(LOG_INFO, "line", detail);
        assert_true(log_pending_bytes() <= 8192);
    }
    uint64_t dropped = log_dropped_lines() - before;
    assert_true(dropped > 0);
    /* The reader wakes up: everything kept arrives whole, and nothing else is lost. */
    char carry[4096];
    size_t carry_len = 0, got = 0;
    for (int round = 0; round < 100 && (log_pending_bytes() > 0 || got == 0); round++) {
        got += drain(p[0], carry, &carry_len);
        log_flush();
    }
    got += drain(p[0], carry, &carry_len);
    assert_int_equal(log_pending_bytes(), 0);
    assert_int_equal(carry_len, 0);
    assert_int_equal(got + dropped, LINES);
    /* And lines flow again. */
    log_event(LOG_WARN, "after", NULL);
    assert_int_equal(drain(p[0], carry, &carry_len), 1);
    assert_int_equal(log_dropped_lines() - before, dropped);
    close(p[0]);
    close(p[1]);
}

static void test_regular_file_never_drops(void **state)
{
    (void)state;
    char path[] = "/tmp/entityd-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    log_init(NULL, fd, 4096);
    uint64_t before = log_dropped_lines();
    for (int i = 0; i < 1000; i++)
        log_event(LOG_INFO, "line", detail);
    log_finish(0);
    assert_int_equal(log_dropped_lines(), before);
    off_t size = lseek(fd, 0, SEEK_END);
    char *all = malloc((size_t)size);
    assert_non_null(all);
    assert_int_equal(pread(fd, all, (size_t)size, 0), size);
    size_t lines = 0;
    for (off_t i = 0; i < size; i++)
        lines += all[i] == '\n';
    assert_int_equal(lines, 1000);
    free(all);
    close(fd);
}

static void test_gone_reader_drops_and_counts(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[0]);
    log_init(NULL, p[1], 8192);
    uint64_t before = log_dropped_lines();
    for (int i = 0; i < 10; i++)
        log_event(LOG_INFO, "line", detail);
    log_event(LOG_ERROR, "last", NULL); /* flushed at once: the pipe refuses it */
    assert_int_equal(log_pending_bytes(), 0);
    assert_int_equal(log_dropped_lines() - before, 11);
    close(p[1]);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stalled_pipe_bounds_and_drops),
        cmocka_unit_test(test_regular_file_never_drops),
        cmocka_unit_test(test_gone_reader_drops_and_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
