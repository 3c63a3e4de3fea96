"""Graceful shutdown: SIGTERM/SIGINT drain in-flight requests, close idle ones, exit 0."""

import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (RawConn, fresh_wallet, revoke_path, scaled,  # noqa: E402
                     http_request_bytes as req_bytes)

def refused(port):
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=0.5):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


class ShutdownTest(harness.ServiceTestCase):

    def signed(self, svc):
        msg, _ = harness.current_message(svc.port)
        return fresh_wallet().sign(msg)

    def raw(self, svc):
        c = RawConn(svc.port, timeout=scaled(10))
        self.addCleanup(c.close)
        return c

    def idle_keep_alive(self, svc):
        c = self.raw(svc)
        c.send(req_bytes('GET', '/healthz'))
        self.assertEqual(c.read_response().status, 200)
        return c

    def in_flight(self, svc, n):
        """Waits until the service has read n requests and sent their Redis commands (the
        paused Redis answers none): the evidence that they are in flight when the signal
        comes, instead of a guessed pause. The tests that use it run without the read cache,
        whose heartbeat would count among the commands waiting."""
        harness.wait_for(lambda: (harness.metric(svc.port, 'entityd_redis_pending_commands')
                                  or 0) >= n, scaled(10), interval=0.02,
                         what='%d requests in flight' % n)

    def assertLogged(self, svc, msg):
        self.assertIn(msg, [r.get('msg') for r in svc.logs()], svc.stdout()[-2000:])

    def test_sigterm_finishes_in_flight_request(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'REDIS_TIMEOUT_MS': 30000, 'IDLE_TIMEOUT_MS': 60000,
                                         'READ_CACHE_MB': 0})
        creds = self.signed(svc)
        idle = self.idle_keep_alive(svc)
        r.pause()
        busy = self.raw(svc)
        t_sent = time.monotonic()  # the Redis op's deadline starts after this
        busy.send(req_bytes('POST', revoke_path(*creds), {'X-Request-Id': 'in-flight'}))
        self.in_flight(svc, 1)
        self.assertEqual(busy.read_available(0.3), b'', 'answered while Redis is paused')

        svc.send_signal(signal.SIGTERM)
        # The listener closes soon: new connections are refused.
        harness.wait_for(lambda: refused(svc.port), scaled(2), interval=0.02,
                         what='the listener to close')
        # The idle keep-alive connection is closed without a response once it has stayed idle
        # for the grace (SHUTDOWN_IDLE_GRACE_MS, 1 s by default) after the signal.
        self.assertIsNotNone(idle.wait_closed(1 + scaled(2)), 'idle connection kept open')
        self.assertEqual(idle.buf, b'')
        # A second signal changes nothing.
        svc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        self.assertTrue(svc.alive(), 'exited with a request in flight')
        # The test's own premise: the op is still within REDIS_TIMEOUT_MS (30 s).
        self.assertLess(time.monotonic() - t_sent, 20, 'too slow to keep the Redis op in time')

        r.resume()
        resp = busy.read_response(timeout=scaled(5))
        self.assertOk(resp)
        self.assertEqual(resp.headers['x-request-id'], 'in-flight')
        self.assertEqual(resp.headers.get('connection', '').lower(), 'close')
        self.assertIsNotNone(busy.wait_closed(scaled(3)))
        self.assertEqual(svc.wait(scaled(5)), 0)
        self.assertLogged(svc, 'shutdown requested: draining')
        self.assertLogged(svc, 'stopped')
        # The revocation went through before the exit.
        keys = r.cli('KEYS', 'auth:revoked:*')
        self.assertEqual(len(keys), 1, keys)

    # "Quickly": without waiting for SHUTDOWN_TIMEOUT_MS (30 s here), measured from before the
    # signal is sent (the service keys on its arrival), with slack for a loaded machine and the
    # sanitizer's leak scan at exit.
    QUICK = {'SHUTDOWN_TIMEOUT_MS': 30000}

    def test_sigterm_idle_exits_quickly(self):
        r = self.redis()
        svc = self.entityd(redis=r, env=self.QUICK)
        for _ in range(3):
            self.assertEqual(svc.request('GET', '/healthz')[0], 200)
        t0 = time.monotonic()
        rc = svc.stop(timeout=scaled(10))
        self.assertEqual(rc, 0)
        self.assertLess(time.monotonic() - t0, scaled(3))
        self.assertLogged(svc, 'stopped')

    def test_sigint_idle_exits_quickly(self):
        r = self.redis()
        svc = self.entityd(redis=r, env=self.QUICK)
        idle = self.idle_keep_alive(svc)
        t0 = time.monotonic()
        rc = svc.stop(timeout=scaled(10), sig=signal.SIGINT)
        self.assertEqual(rc, 0)
        self.assertLess(time.monotonic() - t0, scaled(3))
        self.assertIsNotNone(idle.wait_closed(scaled(1)))
        rec = [x for x in svc.logs() if x.get('msg') == 'shutdown requested: draining']
        self.assertTrue(rec)
        self.assertEqual(rec[0].get('detail'), 'SIGINT')

    def test_sigterm_while_redis_down(self):
        r = self.redis()
        svc = self.entityd(redis=r, env=self.QUICK)
        r.kill()
        svc.wait_ready(scaled(2), ready=False)
        time.sleep(0.3)  # reconnect attempts are under way
        t0 = time.monotonic()
        self.assertEqual(svc.stop(timeout=scaled(10)), 0)
        self.assertLess(time.monotonic() - t0, scaled(3))

    def test_sigterm_lets_partial_request_complete(self):
        r = self.redis()
        # The shutdown timeout far above the steps below, however loaded the machine.
        svc = self.entityd(redis=r, env={'SHUTDOWN_TIMEOUT_MS': 30000})
        part = self.raw(svc)
        data = req_bytes('GET', '/healthz', {'X-Request-Id': 'late-half'})
        part.send(data[:20])
        time.sleep(0.1)
        svc.send_signal(signal.SIGTERM)
        harness.wait_for(lambda: refused(svc.port), scaled(2), what='the listener to close')
        part.send(data[20:])
        resp = part.read_response(timeout=scaled(3))
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.headers['x-request-id'], 'late-half')
        self.assertEqual(resp.headers.get('connection', '').lower(), 'close')
        self.assertIsNotNone(part.wait_closed(scaled(3)))
        self.assertEqual(svc.wait(scaled(5)), 0)

    def test_shutdown_timeout_cuts_partial_request(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'SHUTDOWN_TIMEOUT_MS': 1000,
                                         'HEADER_TIMEOUT_MS': 30000})
        part = self.raw(svc)
        part.send(b'GET /healthz HTTP/1.1\r\nHost: x\r\n')
        time.sleep(0.1)
        t0 = time.monotonic()
        svc.send_signal(signal.SIGTERM)
        rc = svc.wait(1 + scaled(3))
        elapsed = time.monotonic() - t0
        self.assertEqual(rc, 0)
        # The shutdown timer starts when the signal arrives, after t0: no slack needed below.
        self.assertGreaterEqual(elapsed, 1 - harness.CLOCK_TOLERANCE)
        self.assertIsNotNone(part.wait_closed(scaled(2)))
        self.assertEqual(part.buf, b'')

    def test_shutdown_timeout_with_redis_paused_forever(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'SHUTDOWN_TIMEOUT_MS': 1000,
                                         'REDIS_TIMEOUT_MS': 30000, 'READ_CACHE_MB': 0})
        creds = [self.signed(svc) for _ in range(2)]
        r.pause()
        conns = []
        for i, cr in enumerate(creds):
            c = self.raw(svc)
            c.send(req_bytes('POST', revoke_path(*cr), {'X-Request-Id': 'stuck-%d' % i}))
            conns.append(c)
        self.in_flight(svc, 2)
        t0 = time.monotonic()
        svc.send_signal(signal.SIGTERM)
        rc = svc.wait(1 + scaled(3))
        elapsed = time.monotonic() - t0
        self.assertEqual(rc, 0, svc.stderr()[-3000:])
        self.assertGreaterEqual(elapsed, 1 - harness.CLOCK_TOLERANCE)
        self.assertLess(elapsed, 1 + scaled(3))
        self.assertLogged(svc, 'shutdown timeout: closing connections with requests in flight')
        # Each client got an answer (a 503) or a closed socket: never a hang.
        for i, c in enumerate(conns):
            closed = c.wait_closed(scaled(2))
            self.assertIsNotNone(closed, 'client %d left hanging' % i)
            if c.buf:
                c.eof = False
                resp = c.read_response(timeout=1)
                self.assertEqual(resp.headers.get('x-request-id'), 'stuck-%d' % i)
                self.assertEnvelope(resp, 503, 'unavailable')

    def test_in_flight_and_pipelined_behind_it(self):
        # A request pipelined behind the in-flight one when SIGTERM arrives: the first is
        # answered (Connection: close); the second is not started, the connection closes.
        r = self.redis()
        svc = self.entityd(redis=r, env={'REDIS_TIMEOUT_MS': 10000, 'READ_CACHE_MB': 0})
        creds = self.signed(svc)
        r.pause()
        c = self.raw(svc)
        c.send(req_bytes('POST', revoke_path(*creds), {'X-Request-Id': 'first'}) +
               req_bytes('GET', '/healthz', {'X-Request-Id': 'second'}))
        self.in_flight(svc, 1)
        self.assertEqual(c.read_available(0.3), b'')
        svc.send_signal(signal.SIGTERM)
        harness.wait_for(lambda: refused(svc.port), scaled(2), what='the listener to close')
        r.resume()
        resp = c.read_response(timeout=scaled(5))
        self.assertEqual(resp.headers['x-request-id'], 'first')
        self.assertOk(resp)
        self.assertEqual(resp.headers.get('connection', '').lower(), 'close')
        self.assertIsNotNone(c.wait_closed(scaled(3)))
        self.assertEqual(c.buf, b'', 'a request was answered after Connection: close')
        self.assertEqual(svc.wait(scaled(5)), 0)


if __name__ == '__main__':
    harness.main()
