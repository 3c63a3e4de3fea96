"""Draining drops nothing (CONTRACT section 12): two entityd on one Redis behind nginx (upstream
keepalive, `proxy_next_upstream error timeout`, so a POST is never sent twice), each restarted in
turn under wrk load, reads and then signed writes: not one non-2xx answer, not one socket error,
and every drain ends before SHUTDOWN_TIMEOUT_MS; with one process and with WORKERS=2.
scripts/bench-drain is the full-size form."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import RawConn, scaled, http_request_bytes as req_bytes  # noqa: E402

NGINX = shutil.which('nginx') or '/usr/sbin/nginx'
WRK = shutil.which('wrk') or '/usr/bin/wrk'
WRK_DIR = os.path.join(harness.REPO, 'bench', 'wrk')
SHUTDOWN_MS = 10000
TIMED_OUT = 'shutdown timeout: closing connections with requests in flight'

NGINX_CONF = '''daemon off;
master_process on;
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    upstream entityd {{
        server 127.0.0.1:{a} max_fails=0;
        server 127.0.0.1:{b} max_fails=0;
        keepalive 16;
        # Shorter than SHUTDOWN_IDLE_GRACE_MS (1 s): nginx closes an idle connection before the
        # instance would reset it, so no reset can cross a request (docs/OPERATIONS.md).
        keepalive_timeout 500ms;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://entityd;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream error timeout;
        }}
    }}
}}
'''


def answered(port, route):
    """Requests the instance at port answered on route (any status), from its /metrics."""
    return harness.metric(port, 'entityd_http_requests_total', 0.0, route=route)


@unittest.skipUnless(os.path.exists(NGINX) and os.path.exists(WRK), 'needs nginx and wrk')
class DrainTest(harness.ServiceTestCase):

    def start_nginx(self, ports):
        d = harness.tmpdir('nginx-')
        os.makedirs(os.path.join(d, 'tmp'))
        os.chmod(d, 0o755)  # nginx's workers may run as another user
        port = harness.free_port()
        with open(os.path.join(d, 'nginx.conf'), 'w') as f:
            f.write(NGINX_CONF.format(d=d, a=ports[0], b=ports[1], port=port))
        proc = subprocess.Popen([NGINX, '-p', d, '-c', os.path.join(d, 'nginx.conf'),
                                 '-e', os.path.join(d, 'error.log')],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def stop():
            proc.terminate()
            try:
                proc.wait(scaled(10))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.addCleanup(stop)
        harness.wait_for(lambda: harness.request(port, 'GET', '/healthz', timeout=2)[0] == 200,
                         scaled(10), what='nginx answering')
        return port

    def instance(self, r, port):
        env = {'PORT': port, 'SHUTDOWN_TIMEOUT_MS': SHUTDOWN_MS}
        if self.workers:
            env['WORKERS'] = self.workers
        return self.entityd(redis=r, env=env)

    def rolling_restart(self, r, svcs, gw_port, route, wrk_args):
        """One wrk for one rolling restart: each instance in turn gets SIGTERM, exits, starts
        again on its port and is ready; the next step waits until the gateway has sent the
        new one requests (its own count), not for a guessed pause. Returns wrk's result."""
        wrk = subprocess.Popen([WRK, '-t1', '-c16', '-d600s', '-s'] + wrk_args[:1] +
                               ['http://127.0.0.1:%d' % gw_port, '--'] + wrk_args[1:],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: wrk.poll() is None and (wrk.kill(), wrk.wait()))
        try:
            for svc in svcs:
                harness.wait_for(lambda: answered(svc.port, route) >= 50, scaled(20),
                                 what='load reaching the instance on %d' % svc.port)
            for i, svc in enumerate(list(svcs)):
                port = svc.port
                svc.send_signal(signal.SIGTERM)
                rc = svc.wait(scaled(SHUTDOWN_MS / 1000 + 10))
                self.assertEqual(rc, 0, svc.stderr()[-3000:])
                msgs = [x.get('msg') for x in svc.logs()]
                self.assertIn('drained: closing', msgs)
                self.assertNotIn(TIMED_OUT, msgs, 'the drain did not end in time')
                svcs[i] = self.instance(r, port)
                harness.wait_for(lambda: answered(port, route) >= 50, scaled(20),
                                 what='load reaching the restarted instance')
        finally:
            wrk.send_signal(signal.SIGINT)  # wrk prints its summary (done()) and exits
            out, _ = wrk.communicate(timeout=scaled(20))
        out = out.decode(errors='replace')
        m = re.search(r'WRK_RESULT requests=(\d+) .*errors_status=(\d+) errors_socket=(\d+)', out)
        self.assertIsNotNone(m, out)
        return int(m.group(1)), int(m.group(2)), int(m.group(3)), out

    def test_rolling_restarts_drop_nothing(self):
        self.rolling_restarts(None)

    def test_rolling_restarts_drop_nothing_workers2(self):
        # The supervisor passes SIGTERM to every worker; each drains as one process does.
        self.rolling_restarts(2)

    def rolling_restarts(self, workers):
        self.workers = workers
        r = self.redis()
        ports = [harness.free_port(), harness.free_port()]
        while ports[1] == ports[0]:
            ports[1] = harness.free_port()
        svcs = [self.instance(r, p) for p in ports]
        owner = harness.Wallet.random(1)[0]
        msg, _ = harness.current_message(svcs[0].port)
        q = harness.auth_query(*owner.sign(msg))
        st, _, body = harness.request(svcs[0].port, 'POST', '/api/entities?' + q,
                                      {'name': 'Drain', 'description': '', 'twitter': '',
                                       'discord': '', 'website': '', 'imageUrl': '',
                                       'ownerAddresses': [owner.address]})
        self.assertEqual(st, 201, body)
        eid = body['data']['id']
        paths = os.path.join(harness.tmpdir('paths-'), 'reads.txt')
        with open(paths, 'w') as f:
            f.write('/api/entities/%s?address=%s\n' % (eid, owner.address))
        gw = self.start_nginx(ports)

        results = {}
        results['reads'] = self.rolling_restart(
            r, svcs, gw, '/api/entities/{id}', [os.path.join(WRK_DIR, 'paths.lua'), paths])
        results['writes'] = self.rolling_restart(
            r, svcs, gw, '/api/entities/{id}/force-add',
            [os.path.join(WRK_DIR, 'force_add.lua'), '/api/entities/%s/force-add?%s' % (eid, q),
             '1'])
        summary = {k: 'requests=%d non-2xx=%d socket-errors=%d' % v[:3]
                   for k, v in results.items()}
        sys.stderr.write('drain (WORKERS=%s): %s\n' % (workers or 1, summary))
        for kind, (reqs, status, sock, out) in results.items():
            self.assertGreater(reqs, 0, out)
            self.assertEqual((status, sock), (0, 0), '%s: %s' % (kind, summary))


def refused(port):
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=0.5):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


class DrainConnectionsTest(harness.ServiceTestCase):
    """The drain, one connection at a time: what a gateway's idle connections see."""

    def idle_conn(self, svc):
        c = RawConn(svc.port, timeout=scaled(10))
        self.addCleanup(c.close)
        c.send(req_bytes('GET', '/healthz'))
        self.assertEqual(c.read_response().status, 200)
        return c

    def test_requests_on_open_connections_answered_after_sigterm(self):
        r = self.redis()
        # A grace far above the steps below: the connections stay open however slow the machine.
        svc = self.entityd(redis=r, env={'SHUTDOWN_TIMEOUT_MS': 60000,
                                         'SHUTDOWN_IDLE_GRACE_MS': 30000})
        owner = harness.Wallet.random(1)[0]
        msg, _ = harness.current_message(svc.port)
        q = harness.auth_query(*owner.sign(msg))
        probe, write, late = (self.idle_conn(svc) for _ in range(3))
        svc.send_signal(signal.SIGTERM)
        harness.wait_for(lambda: refused(svc.port), scaled(5), what='the listener to close')
        # Readiness turns at once; the answer closes its connection.
        probe.send(req_bytes('GET', '/readyz', {'X-Request-Id': 'probe'}))
        resp = probe.read_response(timeout=scaled(5))
        self.assertEnvelope(resp, 503, 'unavailable')
        self.assertEqual(resp.headers.get('connection', '').lower(), 'close')
        self.assertIsNotNone(probe.wait_closed(scaled(3)))
        # A write on a connection idle since before the signal is served, not refused.
        body = json.dumps({'name': 'Late', 'description': '', 'twitter': '', 'discord': '',
                           'website': '', 'imageUrl': '', 'ownerAddresses': [owner.address]})
        write.send(req_bytes('POST', '/api/entities?' + q,
                             {'Content-Type': 'application/json', 'X-Request-Id': 'w'}, body))
        resp = write.read_response(timeout=scaled(5))
        self.assertEqual(resp.status, 201, resp.body)
        self.assertEqual(resp.headers.get('connection', '').lower(), 'close')
        self.assertIsNotNone(write.wait_closed(scaled(3)))
        self.assertTrue(svc.alive())
        # The last one too; once it is answered no connection is left and the process exits.
        late.send(req_bytes('GET', '/healthz', {'X-Request-Id': 'late'}))
        resp = late.read_response(timeout=scaled(5))
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.headers.get('connection', '').lower(), 'close')
        self.assertEqual(svc.wait(scaled(10)), 0)

    def test_idle_connection_reset_after_grace(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'SHUTDOWN_TIMEOUT_MS': 60000,
                                         'SHUTDOWN_IDLE_GRACE_MS': 500})
        idle = self.idle_conn(svc)
        t0 = time.monotonic()
        svc.send_signal(signal.SIGTERM)
        took = idle.wait_closed(scaled(10))
        self.assertIsNotNone(took, 'idle connection kept open')
        # The grace starts when the signal arrives, after t0.
        self.assertGreaterEqual(time.monotonic() - t0, 0.5 - harness.CLOCK_TOLERANCE)
        self.assertEqual(idle.buf, b'')
        # Well before SHUTDOWN_TIMEOUT_MS (60 s): nothing else held the drain.
        self.assertEqual(svc.wait(scaled(10)), 0)
        msgs = [x.get('msg') for x in svc.logs()]
        self.assertNotIn(TIMED_OUT, msgs)


if __name__ == '__main__':
    harness.main()
