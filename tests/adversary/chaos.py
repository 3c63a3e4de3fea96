"""Chaos run (scripts/chaos): entityd (normally the ASan build) behind a RESP fault proxy in front
of a private Redis, for MINUTES, under
  - well-behaved readers and writers (entity create/update with aliases, force-add, skills,
    levels, admins, awards with idempotency keys retried after 503/504, revocations, progress,
    leaderboard, contributions and events reads) whose every answer is checked; 503/504 are
    accepted for requests needing Redis only while a fault is on and for 1 s (stretched for
    sanitizer builds) after it;
  - entity lifecycles (lifecycle.py): each writing client builds a throwaway entity, tends it
    (skills renamed and deleted, a level deleted, members removed and leaving) and deletes it,
    over and over under one alias, while the others' force-adds and awards race the deletes;
    at the end every erasure must finish and leave nothing of a deleted entity;
  - every hostile client kind of clients.py, two at a time;
  - a Redis fault every few seconds: DEBUG SLEEP, CLIENT PAUSE, SIGKILL and restart (appendfsync
    always, so no acknowledged write may be lost), proxy delay, stall and cut.
At the end it prints the figures and exits non-zero on any violation: a wrong answer, a hostile
connection left open past its deadline, an invariant broken, a sanitizer report, the process
gone. Every loop is bounded in count and time; every process is stopped by its PID."""

import argparse
import os
import random
import resource
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'integration'))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from harness import scaled  # noqa: E402
import clients  # noqa: E402
from clients import Checker, VersionLog, request_bytes  # noqa: E402
from invariants import check_invariants  # noqa: E402
from lifecycle import Lifecycles  # noqa: E402
from harness import FaultProxy  # noqa: E402
from workload import World  # noqa: E402

HEADER_MS, IDLE_MS, WRITE_MS = 2000, 3000, 3000
# Above what the load keeps in flight while Redis answers: 8 clients with up to 5 commands a
# request (an events read: the entity, two role checks, the range, the revocation check) beside
# a burst of 30 reset requests; far below what piles up during a fault.
REDIS_TIMEOUT_MS, MAX_PENDING = 500, 128


def say(msg):
    sys.stdout.write('%s %s\n' % (time.strftime('%H:%M:%S'), msg))
    sys.stdout.flush()


class Figures:
    def __init__(self):
        self.lock = threading.Lock()
        self.hostile = {}
        self.hostile_conns = 0
        self.faults = {}
        self.violations = []
        self.rss = []
        self.pending_max = 0
        self.pending_missing = 0
        self.fault_log = []  # (kind, start, end)

    def add(self, table, key, n=1):
        with self.lock:
            table[key] = table.get(key, 0) + n

    def violation(self, msg):
        with self.lock:
            self.violations.append(msg)
        say('VIOLATION: ' + msg)


class Chaos:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.fig = Figures()
        self.stop = threading.Event()
        self.end = time.monotonic() + args.minutes * 60
        self.redis = None
        self.proxy = None
        self.svc = None
        self.checkers = []

    # ---- set-up ------------------------------------------------------------------------

    def start(self):
        self.redis = harness.Redis(extra_args=['--enable-debug-command', 'local'],
                                   appendonly=True, appendfsync='always')
        self.proxy = FaultProxy(self.redis.port).start()
        env = {'REDIS_URL': 'redis://127.0.0.1:%d/0' % self.proxy.port,
               'REDIS_TIMEOUT_MS': REDIS_TIMEOUT_MS, 'REDIS_MAX_PENDING': MAX_PENDING,
               'HEADER_TIMEOUT_MS': HEADER_MS, 'IDLE_TIMEOUT_MS': IDLE_MS,
               'WRITE_TIMEOUT_MS': WRITE_MS,
               'EVENTS_MAX': 10000000,  # nothing trimmed: every event is checked
               # The background jobs at their default pace (the suites slow their idle looks
               # down, harness.LIMITS_OFF): a step that failed in a fault is tried again soon.
               'ERASE_POLL_MS': 1000, 'SWEEP_POLL_MS': 1000}
        self.svc = harness.Entityd(redis=self.redis, env=env)
        say('entityd pid %d port %d (%s), redis pid %d port %d, proxy port %d' % (
            self.svc.pid, self.svc.port, 'sanitizer build' if harness.SANITIZED else 'plain',
            self.redis.pid, self.redis.port, self.proxy.port))
        self.world = World(self.svc.port)
        self.versions = VersionLog()
        self.life = Lifecycles(self.world)
        for k in range(self.args.clients):
            seed = self.args.seed * 1000 + k
            cases = self.world.cases(k, self.versions, writes=k % 3 != 2, seed=seed)
            if k % 3 != 2:
                cases += [self.life.cycle(k, seed), self.life.race(k, seed)]
            c = Checker(self.svc.port, cases, self.args.minutes * 60 + 60, pace=0.002,
                        timeout=scaled(15), name='good-%d' % k)
            self.checkers.append(c.start())

    def set_faulty(self, on):
        for c in self.checkers:
            if on:
                c.faulty.set()
            else:
                c.faulty.clear()

    # ---- faults ------------------------------------------------------------------------

    def fault(self, kind):
        r, p = self.redis, self.proxy
        if kind == 'sleep':
            r.cli('DEBUG', 'SLEEP', '%.1f' % self.rng.choice((0.3, 1.0, 1.5)), timeout=10)
        elif kind == 'pause':
            ms = self.rng.choice((1000, 3000))
            r.cli('CLIENT', 'PAUSE', str(ms))
            self.stop.wait(ms / 1000.0)
        elif kind == 'kill9':
            r.kill()
            self.stop.wait(self.rng.choice((0.2, 1.0)))
            r.start()
        elif kind == 'delay':
            p.delay(self.rng.choice((100, 800)),
                    match=rb'^EVALSHA ' if self.rng.random() < 0.5 else None)
            self.stop.wait(2.0)
            p.release()
        elif kind == 'stall':
            p.stall(at_command=self.rng.randrange(1, 50)
                    if self.rng.random() < 0.5 else None, match=rb'^EVALSHA ')
            p.wait_triggered(5)
            self.stop.wait(self.rng.choice((0.3, 1.5)))
            p.release()
        elif kind == 'cut':
            p.cut(at_command=self.rng.randrange(1, 100) if self.rng.random() < 0.5 else None,
                  match=rb'^EVALSHA ' if self.rng.random() < 0.5 else None,
                  refuse_s=self.rng.choice((0.0, 1.0)))
            p.wait_triggered(5)
            self.stop.wait(1.0)
            p.release()

    def fault_loop(self):
        kinds = ['sleep', 'pause', 'kill9', 'delay', 'stall', 'cut']
        n = 0
        self.stop.wait(3.0)
        while not self.stop.is_set() and time.monotonic() < self.end - 5 and n < 10000:
            kind = kinds[n % len(kinds)] if n < len(kinds) else self.rng.choice(kinds)
            n += 1
            self.set_faulty(True)
            t_start = time.monotonic()
            try:
                self.fault(kind)
                self.fig.add(self.fig.faults, kind)
                with self.fig.lock:
                    self.fig.fault_log.append((kind, t_start, time.monotonic()))
            except Exception as e:  # noqa: BLE001 - a fault that could not be made
                say('fault %s could not be made: %r' % (kind, e))
                if self.redis.proc is None:
                    self.redis.start()
            finally:
                self.proxy.release()
            self.stop.wait(scaled(1))
            self.set_faulty(False)
            self.stop.wait(self.rng.uniform(2.0, 5.0))

    # ---- hostile clients ---------------------------------------------------------------

    def hostile_once(self, kind):
        port = self.svc.port
        eid = self.world.eids[0]
        get = request_bytes('GET', '/api/entities/%s?address=%s' % (eid,
                                                                    self.world.member.address))
        slack = scaled(1.5)
        now = time.monotonic()
        end = now + max(HEADER_MS, IDLE_MS, WRITE_MS) / 1000.0 + scaled(8)
        fig = self.fig
        if kind == 'reset':
            n = self.rng.randrange(1, 30)
            reqs = [request_bytes('GET', '/api/entities/%s?address=0x%040x' % (
                clients.random_entity_id(), 1)) for _ in range(n)]
            fig.add(fig.hostile, kind)
            with fig.lock:
                fig.hostile_conns += n
            clients.reset_while_owed(port, reqs, self.rng.random() * 0.5)
            return
        with fig.lock:
            fig.hostile_conns += 1
        fig.add(fig.hostile, kind)
        if kind == 'half-close':
            try:
                resp = clients.half_close(port, get, timeout=scaled(15))
            except (OSError, ConnectionError) as e:
                fig.violation('half-close: no answer (%r)' % e)
                return
            if resp.status not in (200, 503, 504) or \
                    (resp.status == 200 and resp.json()['data']['id'] != eid):
                fig.violation('half-close: %r' % resp)
        elif kind == 'trickle':
            res = clients.header_trickle(port, request_bytes('GET', '/healthz',
                                                             {'X-Pad': 'p' * 200}), 0.05, end)
            if res[0] == 'open' or res[2] > HEADER_MS / 1000.0 + slack:
                fig.violation('headers a byte at a time: %s after %s s' % (res[0], res[2]))
        elif kind == 'silent':
            t = clients.say_nothing(port, end)
            if t is None or t > max(HEADER_MS, IDLE_MS) / 1000.0 + slack:
                fig.violation('connect and say nothing: closed after %s' % t)
        elif kind == 'idle':
            st, t, _ = clients.idle_after_answer(port, end)
            if st != 200 or t is None or t > IDLE_MS / 1000.0 + slack:
                fig.violation('idle keep-alive: %s, closed after %s' % (st, t))
        elif kind == 'slow-reader':
            got, t = clients.slow_reader(port, request_bytes('GET', '/metrics'), 200, end)
            if t is None or t > WRITE_MS / 1000.0 + slack:
                fig.violation('one byte a second: closed after %s' % t)
        elif kind == 'never-read':
            socks = []
            try:
                for _ in range(self.rng.randrange(1, 6)):
                    s, _ = clients.pipeline_never_read(port, request_bytes('GET', '/metrics'),
                                                       1024, send_timeout=1.0)
                    socks.append(s)
                with fig.lock:
                    fig.hostile_conns += len(socks) - 1
                t_sent = time.monotonic()
                held = set(socks)
                while held and time.monotonic() < t_sent + WRITE_MS / 1000.0 + slack:
                    time.sleep(0.1)
                    held = clients.server_holds(port, socks)
                if held:
                    fig.violation('pipelined, never read: %d of %d still open %.1fs later' % (
                        len(held), len(socks), time.monotonic() - t_sent))
            finally:
                for s in socks:
                    clients.reset_close(s)

    def hostile_loop(self, k):
        kinds = ['reset', 'half-close', 'trickle', 'silent', 'idle', 'slow-reader',
                 'never-read']
        rng = random.Random(self.args.seed * 7 + k)
        n = 0
        while not self.stop.is_set() and time.monotonic() < self.end - 10 and n < 100000:
            kind = kinds[(n + k) % len(kinds)] if n < len(kinds) else rng.choice(kinds)
            n += 1
            try:
                self.hostile_once(kind)
            except OSError as e:
                say('hostile %s: %r' % (kind, e))
            if not self.svc.alive():
                return

    # ---- monitor -----------------------------------------------------------------------

    def monitor_loop(self):
        fig = self.fig
        while not self.stop.is_set() and time.monotonic() < self.end + 30:
            if not self.svc.alive():
                return
            try:
                fig.rss.append(clients.rss_kib(self.svc.pid))
            except OSError:
                return
            try:
                text = clients.fetch_metrics(self.svc.port, timeout=scaled(5))
                v = harness.sample(text, 'entityd_redis_pending_commands')
                if v is None:
                    fig.pending_missing += 1
                else:
                    fig.pending_max = max(fig.pending_max, v)
                    if v > MAX_PENDING:
                        fig.violation('pending commands %d > REDIS_MAX_PENDING %d' %
                                      (v, MAX_PENDING))
            except (OSError, ConnectionError) as e:
                fig.violation('/metrics not served: %r' % e)
            self.stop.wait(0.5)

    # ---- the run -----------------------------------------------------------------------

    def run(self):
        self.start()
        threads = [threading.Thread(target=self.fault_loop, daemon=True),
                   threading.Thread(target=self.monitor_loop, daemon=True)]
        threads += [threading.Thread(target=self.hostile_loop, args=(k,), daemon=True)
                    for k in range(2)]
        for t in threads:
            t.start()
        last = time.monotonic()
        while time.monotonic() < self.end and self.svc.alive():
            time.sleep(0.5)
            if time.monotonic() - last >= 15:
                last = time.monotonic()
                say('%.0fs left: faults %s, hostile connections %d, violations %d' % (
                    self.end - last, self.fig.faults, self.fig.hostile_conns,
                    len(self.fig.violations)))
        self.stop.set()
        for t in threads:
            t.join(timeout=scaled(30))
        for c in self.checkers:
            if not c.stop(join=scaled(30)):
                self.fig.violation('%s did not stop' % c.name)
        return self.report()

    def when(self, t):
        """t against the faults: during one, or how long after the last one ended."""
        last = None
        for kind, start, end in self.fig.fault_log:
            if start <= t <= end:
                return 'during %s' % kind
            if end < t:
                last = (kind, end)
        if last is None:
            return 'before any fault'
        return '%.2fs after %s ended' % (t - last[1], last[0])

    def report(self):
        fig = self.fig
        svc = self.svc
        alive = svc.alive()
        if not alive:
            fig.violation('entityd exited (%s)' % svc.proc.poll())
        statuses = {}
        by_case = {}  # case name -> answers other than 503/504
        connects = 0
        for c in self.checkers:
            for k, v in c.statuses.items():
                statuses[k] = statuses.get(k, 0) + v
            for _sent, _received, name, st in list(c.log):
                if st not in (503, 504):
                    by_case[name] = by_case.get(name, 0) + 1
            connects += c.connects
            for t, p in zip(c.problem_times, c.problems):
                fig.violation('%s (%s)' % (p, self.when(t)))
        invariants = []
        try:
            if self.redis.proc is None:
                self.redis.start()
            self.proxy.release()
            if alive:
                def request(method, path):
                    st, _, b = harness.request(svc.port, method, path, timeout=scaled(15))
                    return st, b
                invariants += self.life.check_end(self.redis, request, scaled(120))
            invariants += check_invariants(self.redis, self.versions, acks=self.world.acks)
        except Exception as e:  # noqa: BLE001 - reported as a violation
            invariants = ['invariant check failed: %r' % e]
        rc = svc.stop() if alive else svc.returncode
        if alive and rc != 0:
            fig.violation('entityd exited %s on SIGTERM' % rc)
        report = svc.sanitizer_report()
        rss = [x for x in fig.rss if x]
        print('')
        print('chaos figures (%.1f minutes, %s)' % (
            self.args.minutes, 'sanitizer build' if harness.SANITIZED else 'plain build'))
        print('  connections opened: %d (well-behaved %d, hostile %d)' % (
            connects + fig.hostile_conns, connects, fig.hostile_conns))
        print('  requests (well-behaved): %d' % sum(statuses.values()))
        print('  answers by status: %s' % ', '.join('%d: %d' % kv
                                                   for kv in sorted(statuses.items())))
        print('  answered cases (not 503/504): %s' % ', '.join(
            '%s: %d' % kv for kv in sorted(by_case.items())))
        print('  entity lifecycles: %s' % ', '.join(
            '%s: %d' % kv for kv in sorted(self.life.figures.items())))
        print('  hostile clients by kind: %s' % ', '.join(
            '%s: %d' % kv for kv in sorted(fig.hostile.items())))
        print('  faults injected by kind: %s' % ', '.join(
            '%s: %d' % kv for kv in sorted(fig.faults.items())))
        print('  proxy: %s' % self.proxy.stats())
        print('  RSS: min %d KiB, max %d KiB' % (min(rss or [0]), max(rss or [0])))
        print('  pending commands max: %s%s' % (
            fig.pending_max, ' (gauge missing in %d samples)' % fig.pending_missing
            if fig.pending_missing else ''))
        print('  invariant violations: %d' % len(invariants))
        for p in invariants[:20]:
            print('    ' + p)
        print('  sanitizer reports: %d' % (1 if report else 0))
        if report:
            print(report[:3000])
        print('  other violations: %d' % len(fig.violations))
        for v in fig.violations[:30]:
            print('    ' + v)
        bad = len(invariants) + len(fig.violations) + (1 if report else 0)
        return 1 if bad else 0

    def cleanup(self):
        if self.proxy:
            self.proxy.stop()
        if self.svc and self.svc.alive():
            self.svc.kill()
        if self.redis:
            self.redis.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('minutes_pos', nargs='?', type=float, metavar='MINUTES')
    ap.add_argument('--minutes', type=float, default=None)
    ap.add_argument('--clients', type=int, default=8, help='well-behaved clients')
    ap.add_argument('--seed', type=int, default=int(time.time()) % 100000)
    args = ap.parse_args()
    args.minutes = args.minutes or args.minutes_pos or 5.0
    if args.minutes <= 0 or args.minutes > 24 * 60:
        ap.error('MINUTES must be in (0, 1440]')
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    say('chaos for %.1f minutes, seed %d' % (args.minutes, args.seed))
    # Stopped early (SIGTERM, SIGINT): the finally below still stops every process by PID.
    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    chaos = Chaos(args)
    try:
        rc = chaos.run()
    finally:
        chaos.cleanup()
    print('chaos: %s' % ('ok' if rc == 0 else 'VIOLATIONS'))
    sys.exit(rc)


if __name__ == '__main__':
    main()
