"""Logging never blocks the loop: entityd's stdout is a pipe nobody reads.

The pipe fills after a few hundred request lines. Requests must keep being answered at full
speed, lines past LOG_BUFFER_BYTES are dropped and counted in entityd_log_lines_dropped_total,
memory stays bounded, and once a reader comes, what was kept arrives whole, up to the
"stopped" line written on the way out. The process is started here (the harness sends stdout
to a file, which never blocks) and stopped by its PID."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402

BOUND = 65536
ROUND = 2000


class LogStallTest(harness.ServiceTestCase):

    def start(self, r):
        port = harness.free_port()
        env = {k: v for k, v in os.environ.items() if k not in harness.SERVICE_ENV_KEYS}
        env.update({'PORT': str(port), 'HOST': '127.0.0.1', 'AUTH_SECRET': harness.TEST_SECRET,
                    'REDIS_URL': r.url, 'LOG_BUFFER_BYTES': str(BOUND)})
        d = harness.tmpdir('entityd-stall-')
        self.stderr_path = os.path.join(d, 'stderr.log')
        err = open(self.stderr_path, 'wb')
        self.addCleanup(err.close)
        proc = subprocess.Popen([harness.ENTITYD_BIN], env=env, stdout=subprocess.PIPE,
                                stderr=err, stdin=subprocess.DEVNULL, cwd=d)

        def kill():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=scaled(10))
            proc.stdout.close()
        self.addCleanup(kill)

        def ready():
            if proc.poll() is not None:
                raise harness.AbortWait('entityd exited with %s' % proc.returncode)
            try:
                return harness.request(port, 'GET', '/readyz', timeout=2)[0] == 200
            except OSError:
                return False
        harness.wait_for(ready, scaled(15), what='entityd ready')
        return proc, port

    def burst(self, port):
        """ROUND requests one after another: (seconds in all, the slowest one's seconds)."""
        c = harness.Client(port, timeout=scaled(5))
        try:
            t0 = time.monotonic()
            slowest = 0.0
            for _ in range(ROUND):
                t1 = time.monotonic()
                st, _, b = c.request('GET', '/healthz')
                slowest = max(slowest, time.monotonic() - t1)
                self.assertEqual(st, 200, b)
            return time.monotonic() - t0, slowest
        finally:
            c.close()

    def dropped(self, port):
        v = harness.metric(port, 'entityd_log_lines_dropped_total')
        self.assertIsNotNone(v, 'no entityd_log_lines_dropped_total in /metrics')
        return int(v)

    def test_unread_stdout_never_stalls_requests(self):
        r = self.redis()
        proc, port = self.start(r)
        first, _ = self.burst(port)  # fills the pipe, then the buffer
        rss1 = harness.rss_kib(proc.pid)
        second, slowest = self.burst(port)  # all of it past the bound
        rss2 = harness.rss_kib(proc.pid)
        sys.stderr.write('\n%d /healthz with stdout stalled: %.2f s, then %.2f s (slowest '
                         '%.3f s); RSS %d KiB, then %d KiB\n' % (ROUND, first, second, slowest,
                                                                 rss1, rss2))
        # A write blocked on the pipe would hold a request forever (the client's timeout); the
        # throughput of this client on a loaded machine is not the point, so no total bound.
        self.assertLess(slowest, scaled(2))
        self.assertLess(rss2 - rss1, 4096, 'RSS grew by %d KiB' % (rss2 - rss1))
        dropped = self.dropped(port)
        self.assertGreater(dropped, 0)
        self.assertGreater(self.dropped(port), dropped)  # the scrape's own line, dropped too

        # A reader comes: the kept lines arrive whole, and the last is "stopped".
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout.read().splitlines()),
                                  daemon=True)
        reader.start()
        os.kill(proc.pid, signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=scaled(20)), 0)
        reader.join(scaled(10))
        self.assertFalse(reader.is_alive())
        recs = [json.loads(l) for l in lines]  # every line whole
        self.assertEqual(recs[-1]['msg'], 'stopped', recs[-3:])
        self.assertLess(len(recs), 2 * ROUND)
        with open(self.stderr_path, 'rb') as f:
            err = f.read().decode(errors='replace')
        self.assertFalse(any(m in err for m in harness.SANITIZER_MARKERS), err[-3000:])


if __name__ == '__main__':
    harness.main()
