/* sendpool: every job's bytes reach its own peer exactly once, whether the loop sends alone
 * (few jobs, or no helpers) or shares with helpers; a full socket answers EAGAIN and a closed
 * peer an error, each in its own job's result. Real socketpairs, real threads. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/sendpool.h"

#define PAIRS 400 /* 800 descriptors: under the usual limit of 1024 */

static int fds[PAIRS][2];
static sendpool_job jobs[PAIRS];
static struct iovec iov[PAIRS][2];
static char msg[PAIRS][32];

static void pairs_open(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i]), 0);
        snprintf(msg[i], sizeof msg[i], "event %zu\n", i);
        /* two iovecs, as a queue of two chunks */
        iov[i][0] = (struct iovec){msg[i], 6};
        iov[i][1] = (struct iovec){msg[i] + 6, strlen(msg[i]) - 6};
        jobs[i] = (sendpool_job){.fd = fds[i][0], .m = {.msg_iov = iov[i], .msg_iovlen = 2}};
    }
}

static void pairs_check_and_close(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(jobs[i].res, (ssize_t)strlen(msg[i]));
        char got[64];
        ssize_t r = recv(fds[i][1], got, sizeof got, MSG_DONTWAIT);
        assert_int_equal(r, (ssize_t)strlen(msg[i]));
        assert_memory_equal(got, msg[i], (size_t)r);
        assert_int_equal(recv(fds[i][1], got, sizeof got, MSG_DONTWAIT), -1); /* once */
        close(fds[i][0]);
        close(fds[i][1]);
    }
}

static void test_shared_run_sends_each_once(void **state)
{
    (void)state;
    sendpool *p = sendpool_new(2);
    assert_non_null(p);
    for (int round = 0; round < 5; round++) {
        pairs_open(PAIRS);
        sendpool_run(p, jobs, PAIRS);
        pairs_check_and_close(PAIRS);
    }
    assert_int_equal(sendpool_threads(p), 2);
    assert_int_equal(sendpool_shared_runs(p), 5);
    sendpool_free(p);
}

static void test_few_jobs_stay_on_the_loop(void **state)
{
    (void)state;
    sendpool *p = sendpool_new(2);
    pairs_open(SENDPOOL_MIN_SHARED - 1);
    sendpool_run(p, jobs, SENDPOOL_MIN_SHARED - 1);
    pairs_check_and_close(SENDPOOL_MIN_SHARED - 1);
    assert_int_equal(sendpool_threads(p), 0); /* none started */
    assert_int_equal(sendpool_shared_runs(p), 0);
    sendpool_free(p);

    p = sendpool_new(0);
    pairs_open(PAIRS);
    sendpool_run(p, jobs, PAIRS);
    pairs_check_and_close(PAIRS);
    assert_int_equal(sendpool_shared_runs(p), 0);
    sendpool_free(p);
}

static void test_full_and_closed_peers_answer_in_their_own_job(void **state)
{
    (void)state;
    sendpool *p = sendpool_new(3);
    pairs_open(PAIRS);
    /* job 7's socket full, job 9's peer gone */
    static char fill[4096];
    while (send(fds[7][0], fill, sizeof fill, MSG_DONTWAIT) > 0)
        ;
    close(fds[9][1]);
    sendpool_run(p, jobs, PAIRS);
    assert_int_equal(jobs[7].res, -1);
    assert_true(jobs[7].err == EAGAIN || jobs[7].err == EWOULDBLOCK);
    assert_int_equal(jobs[9].res, -1);
    assert_int_equal(jobs[9].err, EPIPE);
    for (size_t i = 0; i < PAIRS; i++) {
        if (i == 7 || i == 9)
            continue;
        assert_int_equal(jobs[i].res, (ssize_t)strlen(msg[i]));
    }
    for (size_t i = 0; i < PAIRS; i++) {
        close(fds[i][0]);
        if (i != 9)
            close(fds[i][1]);
    }
    sendpool_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_run_sends_each_once),
        cmocka_unit_test(test_few_jobs_stay_on_the_loop),
        cmocka_unit_test(test_full_and_closed_peers_answer_in_their_own_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
