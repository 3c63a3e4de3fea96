"""Redis faults under a mixed load of well-behaved clients (reads and signed writes) whose every
answer is checked (tests/adversary/workload.py):

- DEBUG SLEEP (Redis stops answering for a while);
- CLIENT PAUSE 5000 under 64 connections: only 503/504 for requests needing Redis, the
  entityd_redis_pending_commands gauge never above REDIS_MAX_PENDING, RSS bounded;
- Redis killed with SIGKILL and restarted (appendfsync always: no acknowledged write lost);
- the fault proxy (support/faultproxy.py) between entityd and Redis delaying replies (under
  and over REDIS_TIMEOUT_MS), stalling them from the first EVALSHA, cutting the link at
  the Nth command or at an EVALSHA.

During a fault a request needing Redis may be answered 503 unavailable (with Retry-After) or
504 timeout, and any other answer must be the correct one; requests not needing Redis are served
throughout; full service returns within the reconnect backoff's 2 s cap and 1 s (stretched for
sanitizer builds) after the fault ends. After each run the data-set invariants hold
(tests/integration/invariants.py), no entity's __v was seen going backwards, and no
acknowledged write is missing."""

import os
import resource
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'adversary'))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
import clients  # noqa: E402
from clients import Checker, VersionLog  # noqa: E402
from invariants import check_invariants  # noqa: E402
from harness import FaultProxy  # noqa: E402
from workload import World  # noqa: E402

MIB = 1024
RSS_SLACK = 1.5 if harness.SANITIZED else 1.0
PENDING = 'entityd_redis_pending_commands'
SHED = 'entityd_redis_shed_total'


def setUpModule():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def log(msg):
    sys.stderr.write(msg + '\n')
    sys.stderr.flush()


class Monitor:
    """Samples /metrics (the pending gauge) and RSS every interval while a fault runs."""

    def __init__(self, svc, interval=0.1):
        self.svc = svc
        self.interval = interval
        self.pending = []      # gauge values seen (None: the metric is missing)
        self.metrics_errors = 0
        self.rss = []
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_ev.is_set():
            try:
                self.rss.append(clients.rss_kib(self.svc.pid))
            except OSError:
                return
            try:
                text = clients.fetch_metrics(self.svc.port, timeout=scaled(5))
                self.pending.append(harness.sample(text, PENDING))
            except (OSError, ConnectionError):
                self.metrics_errors += 1
            self.stop_ev.wait(self.interval)

    def start(self):
        self.t.start()
        return self

    def stop(self):
        self.stop_ev.set()
        self.t.join(timeout=scaled(10))


class RedisFaultsTest(harness.ServiceTestCase):

    # REDIS_MAX_PENDING for the CLIENT PAUSE scenario (see test_client_pause_under_load).
    pause_max_pending = 384
    # REDIS_MAX_PENDING for the eight well-behaved clients of the other faults: room for all
    # of them at once before and after the fault, where a shed answer (503) is a wrong answer.
    # One request holds at most 12 commands in flight (a read of 9 in MULTI/EXEC, its
    # revocation check) and asks room for 17 (STORE_RESERVED_CMDS 16 kept for the read that
    # follows): 7 x 12 + 17 = 101, under 128 less the 2 kept for the service's upkeep. At 64,
    # a progress read was shed at steady load in the cluster suite (CI, sanitizer build).
    steady_max_pending = 128

    def setup(self, env=None, appendonly=False, proxy=False):
        r = self.redis(extra_args=['--enable-debug-command', 'local'], appendonly=appendonly,
                       appendfsync='always' if appendonly else None)
        # 1 s: the faults below last longer, and a healthy command on a fully loaded machine
        # (the good clients' answers after a fault are judged) stays well under it.
        e = {'REDIS_TIMEOUT_MS': 1000, 'EVENTS_MAX': 10000000}  # nothing trimmed: all checked
        if harness.SANITIZED:
            e['ASAN_OPTIONS'] = (os.environ.get('ASAN_OPTIONS', '') +
                                 ':quarantine_size_mb=16').lstrip(':')
        p = None
        if proxy:
            p = FaultProxy(r.port).start()
            self.addCleanup(p.stop)
            e['REDIS_URL'] = 'redis://127.0.0.1:%d/0' % p.port
        e.update(env or {})
        svc = self.entityd(redis=r, env=e)
        world = World(svc.port)
        return r, svc, world, p

    def run_fault(self, r, svc, world, fault, clients_n=8, max_pending=None, steady=1.0,
                  tail=2.0, expect_errors=True, rss_bound_mib=None, what='fault'):
        """Runs the load, then fault() (which returns once the fault is over), then checks
        everything. Returns the statuses seen during the fault."""
        versions = VersionLog()
        cs = [Checker(svc.port, world.cases(k, versions, writes=True), scaled(120),
                      pace=0.001, timeout=scaled(15), name='good-%d' % k)
              for k in range(clients_n)]
        self.addCleanup(lambda: [c.stop(join=1) for c in cs])
        for c in cs:
            c.start()
        time.sleep(steady)
        mon = Monitor(svc).start()
        base_rss = clients.rss_kib(svc.pid)
        for c in cs:
            c.faulty.set()
        t_fault = time.monotonic()
        fault()
        t_end = time.monotonic()  # the fault is over: Redis answers again
        # Full service from here on: the service may first try Redis again up to its reconnect
        # backoff's cap (2 s, store.c) after the fault, then reload its scripts, on a machine
        # that may be fully loaded.
        time.sleep(2.0 + scaled(1))
        for c in cs:
            c.faulty.clear()
        t_full = time.monotonic()
        time.sleep(tail)
        for c in cs:
            self.assertTrue(c.stop(join=scaled(30)), 'a well-behaved client did not stop')
        mon.stop()
        during, after = {}, {}
        for c in cs:
            for sent, received, name, st in c.log:
                if t_fault <= sent < t_end:
                    during[st] = during.get(st, 0) + 1
                elif sent >= t_full:
                    after[st] = after.get(st, 0) + 1
        problems = ['%+.2fs from the end of the fault: %s' % (t - t_end, p)
                    for c in cs for t, p in zip(c.problem_times, c.problems)]
        peak = max([x for x in mon.rss if x] or [0])
        top = max([x for x in mon.pending if x is not None] or [0])
        log('\n%s (%.2fs): during %s, after %s; pending max %s (%d samples), RSS %d -> %d KiB'
            % (what, t_end - t_fault, sorted(during.items()), sorted(after.items()), top,
               len(mon.pending), base_rss, peak))
        self.assertTrue(svc.alive(), svc.stderr()[-3000:])
        self.assertEqual(problems[:10], [], 'wrong answers (or 503/504 past the fault)')
        if expect_errors:
            self.assertTrue(during.get(503, 0) + during.get(504, 0) > 0,
                            'the fault caused no 503/504: it did not happen')
        self.assertGreater(sum(v for k, v in after.items() if 200 <= k < 300), clients_n,
                           'no full service after the fault')
        if max_pending is not None:
            self.assertTrue(mon.pending, 'no /metrics sample during the fault')
            self.assertFalse(None in mon.pending, '%s missing from /metrics' % PENDING)
            self.assertLessEqual(top, max_pending, '%s above REDIS_MAX_PENDING' % PENDING)
        if rss_bound_mib is not None:
            self.assertLessEqual(peak - base_rss, rss_bound_mib * MIB * RSS_SLACK,
                                 'RSS grew %.1f MiB' % ((peak - base_rss) / 1024.0))
        self.assertEqual(mon.metrics_errors, 0, '/metrics not served during the fault')
        problems = check_invariants(r, versions, acks=world.acks)
        self.assertEqual(problems, [], '\n'.join(problems[:20]))
        return during

    # ------------------------------------------------------------------------------------

    def test_debug_sleep(self):
        cap = self.steady_max_pending
        r, svc, world, _ = self.setup(env={'REDIS_MAX_PENDING': cap})

        def fault():
            r.cli('DEBUG', 'SLEEP', '2', timeout=10)
        self.run_fault(r, svc, world, fault, max_pending=cap, what='DEBUG SLEEP 2')

    def test_client_pause_under_load(self):
        # Repro: CLIENT PAUSE 5000 under 64 connections of mixed load: only 503/504 during
        # the pause, the pending gauge never above REDIS_MAX_PENDING, RSS bounded, full
        # service within 1 s after.
        # The limit is above what the load keeps in flight when Redis answers (so 503s after
        # the pause would be a failure to recover), and below what piles up in 5 s of pause
        # (so requests are shed meanwhile): about 470 commands with the progression reads and
        # awards in the mix, most of them one script each.
        max_pending = self.pause_max_pending
        r, svc, world, _ = self.setup(env={'REDIS_MAX_PENDING': max_pending,
                                           'REDIS_TIMEOUT_MS': 1000})
        shed0 = harness.sample(clients.fetch_metrics(svc.port), SHED)

        def fault():
            self.assertEqual(r.cli('CLIENT', 'PAUSE', '5000'), 'OK')
            time.sleep(5.0)
        during = self.run_fault(r, svc, world, fault, clients_n=64, max_pending=max_pending,
                                rss_bound_mib=64, what='CLIENT PAUSE 5000, 64 connections')
        shed1 = harness.sample(clients.fetch_metrics(svc.port), SHED)
        log('shed: %s -> %s' % (shed0, shed1))
        self.assertIsNotNone(shed1, '%s missing from /metrics' % SHED)
        # 64 connections piling up commands for 5 s: some requests were turned away.
        self.assertGreater(shed1 - (shed0 or 0), 0)
        self.assertGreater(during.get(503, 0), 0, 'no request was shed with 503')

    def test_redis_killed_and_restarted(self):
        r, svc, world, _ = self.setup(appendonly=True, env={'REDIS_TIMEOUT_MS': 1000})

        def fault():
            time.sleep(0.2)
            r.kill()
            time.sleep(1.0)
            r.start()
        self.run_fault(r, svc, world, fault, what='Redis SIGKILL, restarted 1 s later')

    def test_proxy_delay(self):
        r, svc, world, p = self.setup(proxy=True, env={'REDIS_TIMEOUT_MS': 2000})

        # Replies 300 ms late, under REDIS_TIMEOUT_MS: slower, never wrong, never 503/504.
        def slow():
            p.delay(300)
            time.sleep(3.0)
            p.release()
        during = self.run_fault(r, svc, world, slow, expect_errors=False,
                                what='replies 300 ms late')
        self.assertNotIn(503, during)
        self.assertNotIn(504, during)

    def test_proxy_delay_past_timeout_from_evalsha(self):
        r, svc, world, p = self.setup(proxy=True, env={'REDIS_TIMEOUT_MS': 1000})

        def fault():
            p.delay(2500, match=rb'^EVALSHA ')
            self.assertTrue(p.wait_triggered(scaled(10)), 'no EVALSHA passed')
            time.sleep(3.0)
            p.release()
        self.run_fault(r, svc, world, fault, what='replies 2.5 s late from an EVALSHA')

    # How long test_proxy_stall_from_evalsha holds replies (the cluster suite holds them past
    # its silent-link guard), and what it checks of the proxy's links afterwards.
    stall_seconds = 2.5

    def check_stalled_links(self, p, links_before):
        pass

    def test_proxy_stall_from_evalsha(self):
        cap = self.steady_max_pending
        r, svc, world, p = self.setup(proxy=True, env={'REDIS_TIMEOUT_MS': 1000,
                                                        'REDIS_MAX_PENDING': cap})

        def fault():
            p.stall(match=rb'^EVALSHA ')
            self.assertTrue(p.wait_triggered(scaled(10)), 'no EVALSHA passed')
            time.sleep(self.stall_seconds)
            p.release()
        links = p.stats()['connections']
        self.run_fault(r, svc, world, fault, max_pending=cap,
                       what='replies held %.1f s from an EVALSHA' % self.stall_seconds)
        self.check_stalled_links(p, links)

    def test_proxy_cut(self):
        r, svc, world, p = self.setup(proxy=True, env={'REDIS_TIMEOUT_MS': 1000})

        def fault():
            p.cut(at_command=50, refuse_s=1.0)
            self.assertTrue(p.wait_triggered(scaled(10)), 'the 50th command never came')
            time.sleep(1.0)
            p.cut(match=rb'^EVALSHA ')
            self.assertTrue(p.wait_triggered(scaled(10)), 'no EVALSHA passed')
        self.run_fault(r, svc, world, fault, what='link cut at the 50th command, then at an '
                                                  'EVALSHA')
        self.assertGreaterEqual(p.stats()['cuts'], 2)


if __name__ == '__main__':
    harness.main()
