"""WORKERS: several processes on one port under a supervisor. One worker killed under load: the
other keeps serving, the supervisor restarts it within 1 s, /metrics shows both; SIGTERM drains
both and exits 0. WORKERS=1 stays one process."""

import datetime
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402


def log_time(rec):
    return datetime.datetime.strptime(rec['time'], '%Y-%m-%dT%H:%M:%S.%fZ')


def gone(pid):
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True


def exited(pid):
    """Gone, or a zombie: its sockets are closed either way."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] in ('Z', 'X')
    except (OSError, IndexError):
        return True


def children(pid):
    out = set()
    for task in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/children' % (pid, task)) as f:
                out.update(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


class Load:
    """Threads sending GET /healthz, each on a fresh connection, recording (start, ok)."""

    def __init__(self, port, threads=4):
        self.port = port
        self.stop = threading.Event()
        self.results = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def run(self):
        deadline = time.monotonic() + scaled(60)
        while not self.stop.is_set() and time.monotonic() < deadline:
            t0 = time.monotonic()
            try:
                st, _, _ = harness.request(self.port, 'GET', '/healthz', timeout=scaled(5))
                ok = st == 200
            except OSError:
                ok = False
            with self.lock:
                self.results.append((t0, ok))

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        return self.results


class WorkersTest(harness.ServiceTestCase):

    def listening(self, svc):
        """worker index -> pid of its latest "listening" line."""
        out = {}
        for rec in svc.logs():
            if rec.get('msg') == 'listening' and 'worker' in rec:
                out[rec['worker']] = rec['pid']
        return out

    def test_kill_one_worker_under_load(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'WORKERS': 2})
        pids = harness.wait_for(lambda: len(self.listening(svc)) == 2 and self.listening(svc),
                                scaled(10), what='two workers listening')
        self.assertEqual(set(pids), {0, 1})
        self.assertEqual(children(svc.pid), set(pids.values()))

        load = Load(svc.port)
        try:
            time.sleep(0.5)
            os.kill(pids[0], signal.SIGKILL)
            # Its listening socket (SO_REUSEPORT) is closed once it has exited, which on a
            # loaded machine may be a while after the signal: the service keys on that.
            harness.wait_for(lambda: exited(pids[0]), scaled(5), interval=0.005,
                             what='worker 0 to exit')
            exited_at = time.monotonic()
            restarted = harness.wait_for(
                lambda: self.listening(svc).get(0) not in (None, pids[0]) and self.listening(svc),
                scaled(5), what='worker 0 restarted')
            time.sleep(0.5)
        finally:
            results = load.finish()

        # The other worker kept serving: every request begun after the dead worker had exited
        # (and the kernel had closed its socket) was answered; only those before could fail.
        after = [ok for t0, ok in results if t0 > exited_at]
        self.assertGreater(len(after), 20)
        self.assertEqual(after.count(False), 0, '%d of %d requests after the kill failed'
                         % (after.count(False), len(after)))
        # Restarted within 1 s, by the service's own clock: from the death to listening again
        # (the sanitizer build starts slower: scaled).
        recs = svc.logs()
        died = [rec for rec in recs if rec.get('msg') == 'worker died' and rec.get('worker') == 0]
        self.assertEqual(len(died), 1, svc.stdout()[-3000:])
        self.assertEqual(died[0]['pid'], pids[0])
        self.assertIn('signal 9', died[0]['detail'])
        back = [rec for rec in recs if rec.get('msg') == 'listening'
                and rec.get('pid') == restarted[0]]
        delay = (log_time(back[0]) - log_time(died[0])).total_seconds()
        self.assertLess(delay, scaled(1.0))
        self.assertEqual(restarted[1], pids[1])
        self.assertFalse(gone(pids[1]))
        self.assertEqual(children(svc.pid), {restarted[0], pids[1]})

        # /metrics, wherever a scrape lands, shows both workers, the restarted one included.
        def both():
            st, _, body = harness.request(svc.port, 'GET', '/metrics')
            text = body.decode() if isinstance(body, bytes) else str(body)
            return (st == 200 and 'entityd_build_info{worker="0",' in text
                    and 'entityd_build_info{worker="1",' in text and text)
        text = harness.wait_for(both, scaled(5), what='/metrics with both workers')
        for line in text.splitlines():
            if line and not line.startswith('#'):
                self.assertRegex(line, r'^[a-z_]+\{worker="[01]"[,}]')
        samples = [line for line in text.splitlines()
                   if line.startswith('entityd_http_connections_open{')]
        self.assertEqual(len(samples), 2, samples)
        types = [line for line in text.splitlines() if line.startswith('# TYPE ')]
        self.assertEqual(len(types), len(set(types)), 'a family is declared twice')

        # SIGTERM drains both and exits 0; no worker is left behind.
        self.assertEqual(svc.stop(), 0)
        for pid in (restarted[0], pids[1]):
            self.assertTrue(gone(pid))
        msgs = [rec.get('msg') for rec in svc.logs()]
        self.assertEqual(msgs.count('worker stopped'), 2)
        self.assertIn('every worker stopped', msgs)
        # One JSON object per line, also with two writers on one stdout.
        for line in svc.stdout().splitlines():
            if line.strip():
                self.assertTrue(line.startswith('{"time":') and line.endswith('}'), line)

    def test_sigterm_drains_a_request_in_flight_on_each_worker(self):
        r = self.redis()
        # Without the read cache a read is one command: the pending count below counts reads
        # (with it, the cache's heartbeat and each read's CLIENT CACHING would count too).
        svc = self.entityd(redis=r, env={'WORKERS': 2, 'REDIS_TIMEOUT_MS': 30000,
                                         'READ_CACHE_MB': 0})
        harness.wait_for(lambda: len(self.listening(svc)) == 2, scaled(10),
                         what='two workers listening')
        harness.wait_for(svc.ready, scaled(10), what='ready')
        # /readyz answers from whichever worker takes it: every worker's own "redis ready"
        # (its scripts loaded) before Redis stops, or a worker still starting answers 503.
        harness.wait_for(lambda: sum(1 for rec in svc.logs() if rec.get('msg') == 'redis ready')
                         >= 2, scaled(10), what='both workers ready')
        # Redis stopped until the signal is sent: reads wait in every worker that took one.
        r.pause()
        self.addCleanup(lambda: r.paused and r.resume())
        results = []

        def read(k):
            try:
                st, _, _ = harness.request(svc.port, 'GET', '/api/entities/c-%s%012d?address=0x%s'
                                           % ('00000000-0000-4000-8000-', k, '1' * 40),
                                           headers={'Connection': 'close'}, timeout=scaled(10))
                results.append(st)
            except OSError as e:
                results.append(e)
        threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()

        # SIGTERM once every read is in flight (sent to Redis), not after a guessed pause: a
        # request the service has not read yet when the drain starts is closed unanswered.
        def pending():
            st, _, body = harness.request(svc.port, 'GET', '/metrics')
            text = body.decode() if isinstance(body, bytes) else str(body)
            return sum(float(line.split()[-1]) for line in text.splitlines()
                       if line.startswith('entityd_redis_pending_commands')) >= 8
        harness.wait_for(pending, scaled(10), what='eight reads waiting for Redis')
        svc.send_signal(signal.SIGTERM)
        time.sleep(0.2)  # the drain begun with the reads in flight (nothing keys on this)
        r.resume()
        for t in threads:
            t.join()
        self.assertEqual(svc.wait(scaled(15)), 0)
        self.assertEqual(results, [404] * 8)

    def test_one_worker_is_one_process(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'WORKERS': 1})
        msgs = [rec for rec in svc.logs() if rec.get('msg') == 'listening']
        self.assertEqual(len(msgs), 1)
        self.assertNotIn('worker', msgs[0])
        self.assertEqual(children(svc.pid), set())
        st, _, body = harness.request(svc.port, 'GET', '/metrics')
        self.assertIn(b'entityd_build_info{version=', body)
        self.assertNotIn(b'worker=', body)

    def test_bad_workers_value_stops_start(self):
        env = {k: v for k, v in os.environ.items() if k not in harness.SERVICE_ENV_KEYS}
        env.update({'AUTH_SECRET': harness.TEST_SECRET, 'PORT': '0', 'HOST': '127.0.0.1'})
        for bad in ('0', 'two', '257', ''):
            env['WORKERS'] = bad
            p = subprocess.run([harness.ENTITYD_BIN], env=env, capture_output=True,
                               timeout=scaled(10), stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(b'WORKERS must be auto or an integer from 1 to 256', p.stderr)


if __name__ == '__main__':
    harness.main()
