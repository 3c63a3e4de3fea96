/* redis_server: a private redis-server for the unit tests that run against a real one:
 * /usr/bin/redis-server on a free loopback port (no persistence, DEBUG allowed), stopped by
 * its pid when the group ends (and at exit, and with the test process by PR_SET_PDEATHSIG).
 * Without that binary have_redis stays false and the tests skip. */
#ifndef ENTITYD_TEST_REDIS_SERVER_H
#define ENTITYD_TEST_REDIS_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

extern pid_t redis_pid; /* -1 when not running */
extern int redis_port;
extern bool have_redis; /* the binary exists and the server started */

/* A port free on 127.0.0.1 now, or -1. */
int free_port(void);
/* cmocka group setup: starts the server on a free port: 0 (have_redis tells whether it
 * runs), or -1 when it would not start. The teardown stops it. */
int redis_group_setup(void **state);
int redis_group_teardown(void **state);
/* main's exit status from cmocka's: 77 (skipped, for meson) when every test was skipped for
 * want of a server. */
int redis_tests_result(int failed);
/* Starts it again on redis_port and waits until it answers PING (10 s at most). */
bool redis_start(void);
/* Whether the process is still running. */
bool redis_alive(void);
/* Waits (at most ms) until the server answers PING on its port. */
bool redis_wait_up(int ms);
/* SIGTERM, then SIGKILL after 2 s; reaps the process either way. */
void redis_stop(void);
/* SIGKILL, reaped (a test assertion fails when there is no server). */
void redis_kill9(void);

#endif
