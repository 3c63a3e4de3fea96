/* workers: see workers.h. The supervisor is a plain blocking loop on sigtimedwait, with no event
 * loop of its own, so nothing of libuv is ever set up before a fork. */
#define _GNU_SOURCE
#include "core/workers.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

/* A worker that dies within this of its start counts as a quick death: the restart waits twice
 * as long as the last one, from RESTART_MIN_MS up to RESTART_MAX_MS. */
#define QUICK_DEATH_MS 10000
#define RESTART_MIN_MS 50
#define RESTART_MAX_MS 10000
/* After SIGTERM the workers drain for at most shutdown_timeout_ms; past that and this grace,
 * the supervisor kills what is left. */
#define STOP_GRACE_MS 5000

typedef struct worker {
    pid_t pid;           /* 0: not running */
    uint64_t started_ms; /* when it was forked */
    uint64_t restart_at; /* when to fork it again; 0: not scheduled */
    unsigned quick;      /* consecutive quick deaths */
} worker;

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int workers_parse(const char *s)
{
    if (!strcmp(s, "auto")) {
        cpu_set_t set;
        int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
        if (n <= 0)
            n = (int)sysconf(_SC_NPROCESSORS_ONLN);
        return n < 1 ? 1 : n > WORKERS_MAX ? WORKERS_MAX : n;
    }
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    if (errno || end == s || *end || n < 1 || n > WORKERS_MAX)
        return -1;
    return (int)n;
}

static void log_worker(int level, const char *msg, int index, pid_t pid, const char *detail)
{
    buf *l = log_begin(level, msg);
    if (l) {
        log_int(l, "worker", index);
        if (pid > 0)
            log_int(l, "pid", pid);
        if (detail)
            log_str(l, "detail", detail);
        log_end(l);
    }
    log_flush();
}

/* Returns the child's pid in the supervisor, 0 in the child, -1 when fork failed. */
static pid_t spawn(worker *w, int index, pid_t supervisor, const sigset_t *child_mask)
{
    log_flush(); /* the child must not write the supervisor's batch a second time */
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != supervisor) /* it died before the line above took effect */
            _exit(1);
        sigprocmask(SIG_SETMASK, child_mask, NULL);
        return 0;
    }
    if (pid < 0) {
        log_worker(LOG_ERROR, "worker fork failed", index, 0, strerror(errno));
        return -1;
    }
    w->pid = pid;
    w->started_ms = now_ms();
    w->restart_at = 0;
    log_worker(LOG_INFO, "worker started", index, pid, NULL);
    return pid;
}

static void describe(int status, char *out, size_t len)
{
    if (WIFEXITED(status))
        snprintf(out, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, len, "status %d", status);
}

int workers_supervise(const workers_options *o, int *out)
{
    worker ws[WORKERS_MAX];
    int n = o->count < 1 ? 1 : o->count > WORKERS_MAX ? WORKERS_MAX : o->count;
    memset(ws, 0, sizeof ws);
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, &old);
    pid_t self = getpid();
    bool stopping = false, failed = false;
    uint64_t kill_at = 0;

    buf *l = log_begin(LOG_INFO, "supervising workers");
    if (l) {
        log_int(l, "workers", n);
        log_int(l, "pid", self);
        log_end(l);
    }
    for (int i = 0; i < n; i++) {
        pid_t pid = spawn(&ws[i], i, self, &old);
        if (pid == 0) {
            *out = i;
            return WORKERS_CHILD;
        }
        if (pid < 0)
            ws[i].restart_at = now_ms() + RESTART_MAX_MS;
    }
    for (;;) {
        int live = 0;
        uint64_t now = now_ms(), wake = now + 1000;
        for (int i = 0; i < n; i++) {
            live += ws[i].pid != 0;
            if (ws[i].restart_at && ws[i].restart_at <= now) {
                log_worker(LOG_INFO, "restarting worker", i, 0, NULL);
                pid_t pid = spawn(&ws[i], i, self, &old);
                if (pid == 0) {
                    *out = i;
                    return WORKERS_CHILD;
                }
                if (pid < 0)
                    ws[i].restart_at = now + RESTART_MAX_MS;
                else
                    live++;
            }
            if (ws[i].restart_at && ws[i].restart_at < wake)
                wake = ws[i].restart_at;
        }
        if (stopping && live == 0)
            break;
        if (stopping && now >= kill_at) {
            for (int i = 0; i < n; i++)
                if (ws[i].pid) {
                    log_worker(LOG_ERROR, "worker did not drain in time: killing it", i, ws[i].pid,
                               NULL);
                    kill(ws[i].pid, SIGKILL);
                }
            failed = true;
            kill_at = now + 1000;
        }
        if (stopping && kill_at < wake)
            wake = kill_at;
        uint64_t wait = wake > now ? wake - now : 0;
        struct timespec ts = {.tv_sec = (time_t)(wait / 1000),
                              .tv_nsec = (long)(wait % 1000) * 1000000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
            stopping = true;
            kill_at = now_ms() + o->shutdown_timeout_ms + STOP_GRACE_MS;
            log_event(LOG_INFO, "shutdown requested: draining every worker",
                      sig == SIGTERM ? "SIGTERM" : "SIGINT");
            log_flush();
            for (int i = 0; i < n; i++) {
                ws[i].restart_at = 0;
                if (ws[i].pid)
                    kill(ws[i].pid, sig); /* the same signal: the worker logs which it was */
            }
        }
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            int i = 0;
            while (i < n && ws[i].pid != pid)
                i++;
            if (i == n)
                continue;
            ws[i].pid = 0;
            if (o->on_exit)
                o->on_exit(i);
            char how[96];
            describe(status, how, sizeof how);
            bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (stopping) {
                failed |= !clean;
                log_worker(clean ? LOG_INFO : LOG_ERROR, "worker stopped", i, pid, how);
                continue;
            }
            uint64_t t = now_ms();
            ws[i].quick = t - ws[i].started_ms < QUICK_DEATH_MS ? ws[i].quick + 1 : 0;
            uint64_t delay = RESTART_MIN_MS;
            for (unsigned q = 0; q < ws[i].quick && delay < RESTART_MAX_MS; q++)
                delay *= 2;
            if (delay > RESTART_MAX_MS)
                delay = RESTART_MAX_MS;
            ws[i].restart_at = t + delay;
            log_worker(LOG_ERROR, "worker died", i, pid, how);
        }
    }
    log_event(failed ? LOG_ERROR : LOG_INFO, "every worker stopped", NULL);
    log_finish(1000);
    sigprocmask(SIG_SETMASK, &old, NULL);
    *out = failed ? 1 : 0;
    return WORKERS_DONE;
}
