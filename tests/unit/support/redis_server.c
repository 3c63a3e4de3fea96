/* redis_server: a private redis-server for the unit tests that run against a real one (see
 * redis_server.h). */
#include "redis_server.h"

#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
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
#include <uv.h>

#define REDIS_BIN "/usr/bin/redis-server"

pid_t redis_pid = -1;
int redis_port;
bool have_redis;

static uint64_t now_msec(void)
{
    return uv_hrtime() / 1000000;
}

int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static pid_t redis_spawn(int port)
{
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* The child: gone with the test process, whatever ends it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    execl(REDIS_BIN, "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no", "--enable-debug-command", "local", (char *)NULL);
    _exit(127);
}

bool redis_alive(void)
{
    return redis_pid > 0 && waitpid(redis_pid, NULL, WNOHANG) == 0;
}

/* Waits (at most ms) until the server answers PING on its port. */
bool redis_wait_up(int ms)
{
    uint64_t end = now_msec() + (uint64_t)ms;
    while (now_msec() < end) {
        if (!redis_alive())
            return false;
        struct timeval tv = {0, 200000};
        redisContext *c = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
        if (c && !c->err) {
            redisSetTimeout(c, tv);
            redisReply *r = redisCommand(c, "PING");
            bool up = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");
            if (r)
                freeReplyObject(r);
            redisFree(c);
            if (up)
                return true;
        } else if (c) {
            redisFree(c);
        }
        usleep(20000);
    }
    return false;
}

bool redis_start(void)
{
    redis_pid = redis_spawn(redis_port);
    if (redis_pid < 0)
        return false;
    return redis_wait_up(10000);
}

/* SIGTERM, then SIGKILL after 2 s; reaps the process either way. */
void redis_stop(void)
{
    if (redis_pid <= 0)
        return;
    pid_t pid = redis_pid;
    redis_pid = -1;
    kill(pid, SIGCONT);
    kill(pid, SIGTERM);
    for (int i = 0; i < 200; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

void redis_kill9(void)
{
    assert_true(redis_pid > 0);
    assert_int_equal(kill(redis_pid, SIGKILL), 0);
    assert_int_equal(waitpid(redis_pid, NULL, 0), redis_pid);
    redis_pid = -1;
}

int redis_group_setup(void **state)
{
    (void)state;
    if (access(REDIS_BIN, X_OK) != 0) {
        fprintf(stderr, "%s not found: every test is skipped\n", REDIS_BIN);
        return 0;
    }
    atexit(redis_stop);
    redis_port = free_port();
    if (redis_port <= 0 || !redis_start()) {
        fprintf(stderr, "redis-server did not start on port %d\n", redis_port);
        redis_stop();
        return -1;
    }
    have_redis = true;
    return 0;
}

int redis_group_teardown(void **state)
{
    (void)state;
    redis_stop();
    return 0;
}

int redis_tests_result(int failed)
{
    return failed == 0 && !have_redis ? 77 : failed;
}
