"""Hostile clients against entityd (tests/adversary/clients.py), each next to well-behaved
clients whose every answer is checked. After each: the process is alive, no sanitizer report
(the harness reads stderr after every test), the well-behaved clients got only correct answers,
memory stayed under the documented per-connection bound, and every hostile connection was
closed within its deadline (header, idle or write timeout).

- A reset (SO_LINGER 0) of 300 connections while Redis sleeps and their answers are owed.
- 20 connections pipelining 1024 GET /metrics each and never reading: RSS growth <= 32 MiB and
  all closed within WRITE_TIMEOUT_MS + 1 s.
- A pipeline read late (within the write timeout): every answer arrives, in order.
- The mix at once: half-close (answered), headers a byte at a time (answered when fast enough,
  closed at the header timeout when not), connect-and-say-nothing, idle after an answer, one
  byte read a second, resets at random moments."""

import os
import random
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
from clients import Checker, VersionLog, request_bytes  # noqa: E402
from invariants import check_invariants  # noqa: E402
from workload import World  # noqa: E402

MIB = 1024
EVENTS_MAX = 10000000
# Sanitizer builds add shadow memory (1/8 of what is allocated) and redzones to every block.
RSS_SLACK = 1.5 if harness.SANITIZED else 1.0


def setUpModule():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def log(msg):
    sys.stderr.write(msg + '\n')
    sys.stderr.flush()


def asan_env(quarantine_mb=None):
    """ASAN_OPTIONS for the service: the caller's, with a small quarantine where RSS is
    measured (freed blocks held for use-after-free detection would count as growth)."""
    opts = os.environ.get('ASAN_OPTIONS', '')
    if quarantine_mb is not None:
        opts = (opts + ':' if opts else '') + 'quarantine_size_mb=%d' % quarantine_mb
    return {'ASAN_OPTIONS': opts} if opts else {}


def base_env(quarantine_mb=None):
    """The service's settings for these tests. REDIS_TIMEOUT_MS is long: the well-behaved
    clients must get only right answers while hostile ones keep a loaded machine busy, and a
    worker starved of CPU for seconds (seen: 20 connections pipelining /metrics under the
    sanitizers, both cores busy) would otherwise answer 504 and, past twice the timeout, drop a
    Redis link that merely went unread. The tests that want Redis faults set their own."""
    e = dict(asan_env(quarantine_mb))
    e['EVENTS_MAX'] = EVENTS_MAX  # nothing trimmed: every event is checked
    e['REDIS_TIMEOUT_MS'] = int(scaled(5) * 1000)
    return e


def summarize(v):
    if isinstance(v, list):
        return '%d: %s' % (len(v), ', '.join(summarize(x) for x in v[:6]))
    if isinstance(v, tuple):
        return '(%s)' % ' '.join(summarize(x) for x in v)
    if isinstance(v, float):
        return '%.2f' % v
    if isinstance(v, clients.Response):
        return str(v.status)
    return repr(v)


class RssSampler:
    """Samples a process's RSS every interval until stopped; keeps the peak."""

    def __init__(self, pid, interval=0.05):
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_ev.is_set():
            try:
                v = clients.rss_kib(self.pid) or 0
            except OSError:
                return
            self.peak = max(self.peak, v)
            self.samples += 1
            self.stop_ev.wait(self.interval)

    def start(self):
        self.t.start()
        return self

    def stop(self):
        self.stop_ev.set()
        self.t.join(timeout=5)
        return self.peak


class AdversaryTest(harness.ServiceTestCase):

    def start(self, env=None, quarantine_mb=None, debug_redis=False):
        r = self.redis(extra_args=['--enable-debug-command', 'local'] if debug_redis else ())
        e = base_env(quarantine_mb)
        e.update(env or {})
        svc = self.entityd(redis=r, env=e)
        world = World(svc.port)
        return r, svc, world

    def checkers(self, svc, world, n, seconds, versions, writes=False):
        cs = [Checker(svc.port, world.cases(100 + k, versions, writes=writes), seconds,
                      pace=0.002, timeout=scaled(10), name='good-%d' % k) for k in range(n)]
        for c in cs:
            c.start()
        self.addCleanup(lambda: [c.stop(join=1) for c in cs])
        return cs

    def finish_checkers(self, cs, what):
        for c in cs:
            self.assertTrue(c.stop(join=scaled(30)), 'a well-behaved client did not stop')
        problems = [p for c in cs for p in c.problems]
        statuses = {}
        for c in cs:
            for k, v in c.statuses.items():
                statuses[k] = statuses.get(k, 0) + v
        log('%s: well-behaved answers %s' % (what, sorted(statuses.items())))
        self.assertEqual(problems[:10], [], 'a well-behaved client got a wrong answer')
        self.assertGreater(sum(statuses.values()), 10, 'the well-behaved clients got no answers')
        return statuses

    def assertAlive(self, svc):
        self.assertTrue(svc.alive(), 'entityd died (exit %s):\n%s' % (
            svc.proc.poll() if svc.proc else svc.returncode, svc.stderr()[-4000:]))
        rep = svc.sanitizer_report()
        self.assertIsNone(rep, 'sanitizer report:\n%s' % rep)
        st, _, b = harness.request(svc.port, 'GET', '/healthz', timeout=scaled(5))
        self.assertEqual(st, 200, b)

    # ------------------------------------------------------------------------------------

    def test_reset_while_answer_owed(self):
        # Repro: Redis asleep (DEBUG SLEEP 1.5), 300 connections each asking for an unknown
        # entity, reset with SO_LINGER 0 300 ms later while every answer is owed. Afterwards
        # the process must be alive with no sanitizer report.
        r, svc, world = self.start(env={'REDIS_TIMEOUT_MS': 5000}, debug_redis=True)
        versions = VersionLog()
        cs = self.checkers(svc, world, 2, scaled(30), versions)
        for c in cs:
            c.faulty.set()  # Redis sleeps: answers needing it may be 503/504 meanwhile
        time.sleep(0.3)
        sleeper = threading.Thread(target=lambda: r.cli('DEBUG', 'SLEEP', '1.5', timeout=10))
        t_sleep = time.monotonic()
        sleeper.start()
        time.sleep(0.05)
        reqs = [request_bytes('GET', '/api/entities/%s?address=0x%040x' % (
            clients.random_entity_id(), 1)) for _ in range(300)]
        sent = clients.reset_while_owed(svc.port, reqs, delay=0.3)
        log('\nreset while owed: %d connections sent and reset %.2fs into the sleep' % (
            sent, time.monotonic() - t_sleep))
        sleeper.join(timeout=10)
        # DEBUG SLEEP was answered: Redis serves again from here on.
        self.assertEqual(sent, 300)
        # The owed answers come back from Redis for closed connections; the well-behaved
        # clients get full service again once the backlog is through.
        time.sleep(scaled(1))
        for c in cs:
            c.faulty.clear()
        time.sleep(scaled(1))
        self.assertAlive(svc)
        self.finish_checkers(cs, 'reset while owed')
        self.assertEqual(check_invariants(r, versions, acks=world.acks), [])
        # Twice more, the resets coming before and after Redis answers.
        for delay in (0.05, 1.0):
            for c in cs:
                c.faulty.set()
            sleeper = threading.Thread(target=lambda: r.cli('DEBUG', 'SLEEP', '0.5', timeout=10))
            sleeper.start()
            time.sleep(0.05)
            clients.reset_while_owed(svc.port, reqs[:100], delay=delay)
            sleeper.join(timeout=10)
            self.assertAlive(svc)

    def test_pipeline_never_read(self):
        # Repro: 20 connections each pipeline 1024 GET /metrics and never read a byte. The
        # service must stop taking their requests (WRITE_BUFFER_BYTES), keep its memory under
        # the documented bound, and close them at the write timeout.
        write_ms = 3000
        r, svc, world = self.start(env={'WRITE_TIMEOUT_MS': write_ms, 'IDLE_TIMEOUT_MS': 3000},
                                   quarantine_mb=8)
        versions = VersionLog()
        cs = self.checkers(svc, world, 2, scaled(60), versions)
        for _ in range(20):  # the answer's size, and everything warmed up
            st, _, body = harness.request(svc.port, 'GET', '/metrics')
            self.assertEqual(st, 200)
        answer = len(body) + 200
        time.sleep(0.5)
        base_rss = clients.rss_kib(svc.pid)
        sampler = RssSampler(svc.pid).start()
        req = request_bytes('GET', '/metrics')
        socks = []
        self.addCleanup(lambda: [clients.reset_close(s) for s in socks])
        t0 = time.monotonic()
        for _ in range(20):
            s, n = clients.pipeline_never_read(svc.port, req, 1024, send_timeout=1.0)
            socks.append(s)
        t_sent = time.monotonic()
        # Closed: the service holds none of their sockets (the kernel's table: its end of each
        # has no owner left), whether it reset them or closed with data still queued; each
        # seen held first (one not yet accepted has no owner either).
        deadline = t_sent + write_ms / 1000.0 + scaled(5)
        closed_at = None
        held = set(socks)
        seen = set()
        while time.monotonic() < deadline + scaled(5):
            held = clients.server_holds(svc.port, socks)
            seen |= held
            if not held and len(seen) == len(socks):
                closed_at = time.monotonic()
                break
            time.sleep(0.05)
        gone = clients.watch_closed(socks, time.monotonic() + 0.5)
        time.sleep(0.5)
        peak = sampler.stop()
        growth = peak - base_rss
        bound = 32 * MIB * RSS_SLACK
        per_conn_doc = (262144 + answer + 65536 + 131072 + 1048576) / 1024.0
        log('\npipeline never read: %d B answers, RSS %d -> peak %d KiB (growth %.1f MiB, '
            'bound %.1f MiB; documented per connection %.0f KiB), closed after %s (%d held), '
            'sockets seen reset %d of 20' % (
                answer, base_rss, peak, growth / 1024.0, bound / 1024.0, per_conn_doc,
                '%.2fs' % (closed_at - t_sent) if closed_at else 'never', len(held),
                sum(1 for v in gone.values() if v is not None)))
        self.assertAlive(svc)
        self.assertLessEqual(growth, bound, 'RSS grew %.1f MiB' % (growth / 1024.0))
        self.assertIsNotNone(closed_at, 'the never-read connections were not closed')
        # Each write deadline starts at that connection's first write the socket cannot take
        # at once: after t0 (the lower bound holds with no slack), and after the service has
        # rendered the answers that fill the kernel's buffers (half a MiB of /metrics each),
        # which a loaded machine may do seconds after t_sent (seen: closed 7.7 s after it with
        # two workers under the sanitizers). The upper bound's slack covers that, the 100 ms
        # sweep and the loop's own delay; in cluster mode six Redis servers share the CPUs.
        self.assertLessEqual(closed_at - t_sent, write_ms / 1000.0 + scaled(5),
                             'closed later than WRITE_TIMEOUT_MS + slack')
        self.assertGreaterEqual(closed_at - t0, write_ms / 1000.0 - harness.CLOCK_TOLERANCE,
                                'closed before the write timeout')
        self.finish_checkers(cs, 'pipeline never read')
        self.assertEqual(check_invariants(r, versions, acks=world.acks), [])

    def test_pipeline_read_late_gets_every_answer(self):
        # Backpressure must resume: a pipeline of 1024 that is read after a pause (within the
        # write timeout) gets every answer, in order.
        # Read 1.5 s after sending: far within the write timeout, however loaded the machine.
        r, svc, world = self.start(env={'WRITE_TIMEOUT_MS': 10000})
        eid = world.eids[0]
        paths = ['/metrics' if k % 2 else '/api/entities/%s?address=%s' % (
            eid, world.member.address) for k in range(1024)]
        s = clients.connect(svc.port, rcvbuf=8192, timeout=scaled(10))
        self.addCleanup(s.close)
        data = b''.join(request_bytes('GET', p) for p in paths)
        sender = threading.Thread(target=lambda: s.sendall(data), daemon=True)
        sender.start()
        time.sleep(1.5)
        got, eof = clients.read_responses(s, 1024, time.monotonic() + scaled(30))
        sender.join(timeout=5)
        log('\npipeline read late: %d answers' % len(got))
        self.assertEqual(len(got), 1024, 'answers missing (eof %s)' % eof)
        for k, resp in enumerate(got):
            self.assertEqual(resp.status, 200, (k, resp))
            if k % 2:
                self.assertIn(b'entityd_http_connections_open', resp.body, k)
            else:
                self.assertEqual(resp.json()['data']['id'], eid, k)
        self.assertAlive(svc)

    def test_hostile_mix(self):
        header_ms, idle_ms, write_ms = 2000, 3000, 3000
        r, svc, world = self.start(env={'HEADER_TIMEOUT_MS': header_ms,
                                        'IDLE_TIMEOUT_MS': idle_ms,
                                        'WRITE_TIMEOUT_MS': write_ms}, quarantine_mb=8)
        versions = VersionLog()
        cs = self.checkers(svc, world, 3, scaled(90), versions, writes=True)
        eid = world.eids[0]
        get = request_bytes('GET', '/api/entities/%s?address=%s' % (eid, world.member.address))
        # Deadlines are enforced by a 100 ms sweep on a loaded loop; in cluster mode six Redis
        # servers share the two CPUs as well, and closes came up to 1.8 s late there.
        slack = scaled(2.5)
        base_rss = clients.rss_kib(svc.pid)
        sampler = RssSampler(svc.pid).start()
        t0 = time.monotonic()
        end = t0 + max(header_ms, idle_ms, write_ms) / 1000.0 + scaled(8)
        rng = random.Random(7)

        def many(fn, n):
            return lambda: clients.run_threads([fn] * n, join=end - time.monotonic() + 5)

        def resets():
            n = 0
            while time.monotonic() < t0 + 3 and n < 40:
                reqs = [get] * rng.randrange(1, 6)
                clients.reset_while_owed(svc.port, reqs, rng.random() * 0.01)
                n += 1
            return n

        jobs = {
            'half-close': many(lambda: clients.half_close(svc.port, get, timeout=scaled(10)), 10),
            'trickle-fast': many(lambda: clients.header_trickle(
                svc.port, request_bytes('GET', '/healthz'), 0.01, end), 5),
            'trickle-slow': many(lambda: clients.header_trickle(
                svc.port, request_bytes('GET', '/healthz', {'X-Pad': 'p' * 200}), 0.05, end),
                10),
            'say-nothing': many(lambda: clients.say_nothing(svc.port, end), 10),
            'idle': many(lambda: clients.idle_after_answer(svc.port, end), 5),
            'slow-reader': many(lambda: clients.slow_reader(
                svc.port, request_bytes('GET', '/metrics'), 200, end), 5),
            'resets': resets,
        }
        names = list(jobs)
        results = dict(zip(names, clients.run_threads([jobs[k] for k in names],
                                                      join=end - t0 + scaled(10))))
        peak = sampler.stop()
        log('\nhostile mix (%.1fs): RSS %d -> peak %d KiB' % (time.monotonic() - t0, base_rss,
                                                              peak))
        for k in names:
            log('  %s: %s' % (k, summarize(results[k])))
        self.assertAlive(svc)
        for k in names:
            self.assertNotIsInstance(results[k], Exception, '%s: %r' % (k, results[k]))
        for res in results['half-close']:
            self.assertIsInstance(res, clients.Response, 'half-close: %r' % (res,))
            self.assertEqual(res.status, 200, res)
            self.assertEqual(res.json()['data']['id'], eid)
        # Lower bounds below are measured from a client event that comes before the one the
        # service keys on (clients.py says which), so they hold with no slack beyond
        # CLOCK_TOLERANCE; upper bounds from one that may come after it carry `slack`.
        for res in results['trickle-fast']:
            # Answered, unless this client itself (one of ~50 threads) took so long to send
            # its last byte that the header deadline had nearly passed: then it may be closed.
            if res[0] != 'answer' and res[3] is not None and \
                    res[3] > header_ms / 1000.0 - slack:
                continue
            self.assertEqual(res[0], 'answer', 'a request sent within the header timeout: %r'
                             % (res,))
            self.assertEqual(res[1].status, 200)
        for res in results['trickle-slow']:
            # Never finished in time: closed at the header timeout (an answer such as 408 may
            # come first), not left open.
            self.assertIn(res[0], ('closed', 'answer'), res)
            self.assertIsNotNone(res[2])
            if res[0] == 'answer':
                self.assertGreaterEqual(res[1].status, 400, res)
            self.assertLessEqual(res[2], header_ms / 1000.0 + slack, res)
            self.assertGreaterEqual(res[2], header_ms / 1000.0 - harness.CLOCK_TOLERANCE, res)
        for res in results['say-nothing']:
            # The header deadline (the shorter) closes it; it starts at the accept.
            self.assertIsNotNone(res, 'a silent connection was never closed')
            self.assertLessEqual(res, header_ms / 1000.0 + slack)
            self.assertGreaterEqual(res, header_ms / 1000.0 - harness.CLOCK_TOLERANCE)
        for st, from_answer, from_send in results['idle']:
            self.assertEqual(st, 200)
            self.assertIsNotNone(from_answer, 'an idle keep-alive connection was never closed')
            self.assertLessEqual(from_answer, idle_ms / 1000.0 + slack)
            self.assertGreaterEqual(from_send, idle_ms / 1000.0 - harness.CLOCK_TOLERANCE)
        for got, res in results['slow-reader']:
            # Its write deadline starts once the answers rendered for it fill the kernel's
            # buffers, which on a loaded machine may come seconds after its pipeline was sent.
            self.assertIsNotNone(res, 'a one-byte-a-second reader was never closed')
            self.assertLessEqual(res, write_ms / 1000.0 + slack + scaled(2.5))
        # 50 hostile connections at most at once: far under their documented bound each.
        self.assertLessEqual(peak - base_rss, 32 * MIB * RSS_SLACK)
        self.finish_checkers(cs, 'hostile mix')
        self.assertEqual(check_invariants(r, versions, acks=world.acks), [])


if __name__ == '__main__':
    harness.main()
