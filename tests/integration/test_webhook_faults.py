"""Webhook delivery under faults (CONTRACT section 14, "At least once, never lost silently"):
an instance killed with SIGKILL mid-delivery is taken over by another and the receiver gets
every event; a receiver down for a while (connection refused), one that stalls (the attempt
times out), one that resets the connection: each gets every event afterwards. An endpoint
pointing at a loopback address, without WEBHOOK_ALLOW_PRIVATE, is refused at connect time and
its delivery failed with that reason, nothing reaching the receiver. An award answers no slower
while its entity's endpoint stalls. A resolver that never answers gets an endpoint's creation
answered 503 at WEBHOOK_TIMEOUT_MS, the loop serving meanwhile, and the lookup's late end
harms nothing. Under the sanitizers (the 'hostile' suite)."""

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
import webhook_kit as kit  # noqa: E402

ENV = {'WEBHOOK_ALLOW_PRIVATE': 'true', 'WEBHOOK_ALLOW_HTTP': 'true', 'WEBHOOK_POLL_MS': '100',
       'WEBHOOK_LEASE_MS': '1500', 'WEBHOOK_RETRY_SCHEDULE': '1s,1s,1s,1s,1s,1s,1s,1s',
       'WEBHOOK_TIMEOUT_MS': '1500', 'RATE_WRITES_PER_MINUTE': '0'}


@harness.unittest.skipUnless(kit.available(), 'tests/node tools are not installed')
class WebhookFaultsTest(kit.InstancesCase):

    ENV = ENV

    # ---- helpers ----

    def endpoint(self, svc, eid, path, url=None, direct=False):
        """A new endpoint through the API; direct: written into Redis (a URL the API refuses)."""
        url = url or self.rx.url(path)
        if direct:
            wid, secret = kit.write_endpoint(self.r, eid, url, self.owner.address)
        else:
            wid, secret = kit.make_endpoint(lambda m, p, b: self.call(svc, m, p, b), eid, url)
        self.rx.tell(path, secrets=[secret])
        return wid

    def join_n(self, svc, eid, n):
        for _ in range(n):
            self.assertOk(self.call(svc, 'POST', '/api/entities/%s/force-add' % eid,
                                    {'addresses': ['0x' + os.urandom(20).hex()], 'Chain': 'eth'}))
        b = self.assertOk(self.call(svc, 'GET', '/api/entities/%s/events?limit=1000' % eid))
        return sorted((e['id'] for e in b['data'] if e['type'] == 'member.added'),
                      key=lambda i: [int(x) for x in i.split('-')])

    def log(self, eid, wid):
        raw = self.r.cli('HGETALL', 'ent:{%s}:wh:%s:log' % (eid, wid))
        return {kit.text(raw[i]): json.loads(kit.text(raw[i + 1]))
                for i in range(0, len(raw), 2)}

    def assert_every_event(self, path, ids, timeout):
        """Every event at least once, each verified; the last delivery of each in order."""
        def all_there():
            got = self.rx.got(path)
            ok = {g['eventId'] for g in got if g['answer'] == 'ok'}
            return got if ok >= set(ids) else None
        got = harness.wait_for(all_there, timeout, interval=0.1, what='every event')
        self.assertTrue(all(g['verified'] == [0] for g in got), got)
        return got

    # ---- tests ----

    def test_sigkill_mid_delivery_taken_over(self):
        a = self.start()
        eid = self.entity(a)
        path = '/kill-' + uuid.uuid4().hex[:6]
        self.rx.tell(path, script=['stall'])
        self.endpoint(a, eid, path)
        ids = self.join_n(a, eid, 5)
        first = self.rx.wait_got(path, 1, scaled(20))[0]  # a's attempt, stalled
        self.assertEqual(first['eventId'], ids[0])
        b = self.start()
        a.kill()
        got = self.assert_every_event(path, ids, scaled(30))
        # b made the stalled one again: the same webhook-id
        self.assertEqual([g['id'] for g in got].count('%s:%s' % (eid, ids[0])), 2)
        self.assertTrue(b.alive())

    def test_receiver_down_for_a_while(self):
        svc = self.start()
        eid = self.entity(svc)
        port = harness.free_port()
        path = '/down'
        wid = self.endpoint(svc, eid, path, url='http://127.0.0.1:%d%s' % (port, path))
        ids = self.join_n(svc, eid, 3)

        def refused_twice():
            d = self.log(eid, wid).get('%s:%s' % (eid, ids[0]))
            return d if d and d['attempts'] >= 2 else None
        d = harness.wait_for(refused_twice, scaled(20))
        self.assertEqual(d['status'], 'pending')
        self.assertIsNone(d['responseStatus'])
        self.assertIn('onnect', d['reason'])
        rx = kit.Receiver(port)
        try:
            rx.tell(path, secrets=[kit.text(self.r.cli('HGET', 'ent:{%s}:webhooks' % eid,
                                                       'sec:' + wid))])
            rx.wait_got(path, 3, scaled(30))
            got = rx.got(path)
            self.assertEqual(sorted({g['eventId'] for g in got}), sorted(ids))
            self.assertTrue(all(g['verified'] == [0] for g in got))
        finally:
            rx.stop()

    def test_stalled_receiver_times_out_and_is_retried(self):
        svc = self.start(WEBHOOK_TIMEOUT_MS='1000')
        eid = self.entity(svc)
        path = '/stall-' + uuid.uuid4().hex[:6]
        self.rx.tell(path, script=['stall'])
        wid = self.endpoint(svc, eid, path)
        ids = self.join_n(svc, eid, 2)
        got = self.assert_every_event(path, ids, scaled(20))
        self.assertEqual(got[0]['answer'], 'stall')
        self.assertEqual(got[0]['eventId'], ids[0])
        again = [g for g in got if g['eventId'] == ids[0] and g['answer'] == 'ok'][0]
        self.assertGreaterEqual(again['at'] - got[0]['at'], 1000)
        d = harness.wait_for(lambda: (lambda x: x if x['status'] == 'succeeded' else None)(
            self.log(eid, wid)['%s:%s' % (eid, ids[0])]), scaled(10))
        self.assertEqual(d['attempts'], 2)

    def test_reset_connection_is_retried(self):
        svc = self.start()
        eid = self.entity(svc)
        path = '/reset-' + uuid.uuid4().hex[:6]
        self.rx.tell(path, script=['reset', 'reset'])
        wid = self.endpoint(svc, eid, path)
        ids = self.join_n(svc, eid, 2)
        self.assert_every_event(path, ids, scaled(20))
        d = harness.wait_for(lambda: (lambda x: x if x['status'] == 'succeeded' else None)(
            self.log(eid, wid)['%s:%s' % (eid, ids[0])]), scaled(10))
        self.assertGreaterEqual(d['attempts'], 2)

    def test_private_address_refused_at_connect(self):
        svc = self.start(WEBHOOK_ALLOW_PRIVATE=None)
        eid = self.entity(svc)
        path = '/ssrf-' + uuid.uuid4().hex[:6]
        wid = self.endpoint(svc, eid, path, direct=True)
        ids = self.join_n(svc, eid, 1)
        did = '%s:%s' % (eid, ids[0])
        d = harness.wait_for(lambda: (lambda x: x if x and x['status'] == 'failed' else None)(
            self.log(eid, wid).get(did)), scaled(20))
        self.assertEqual(d['reason'], 'refused: a loopback address')
        self.assertEqual(d['attempts'], 1)
        self.assertEqual(self.rx.got(path), [])
        self.assertIn('entityd_webhook_refused_total 1',
                      harness.request(svc.port, 'GET', '/metrics')[2].decode())

    def test_http_url_refused_without_allow_http(self):
        svc = self.start(WEBHOOK_ALLOW_HTTP=None)
        eid = self.entity(svc)
        path = '/plain-' + uuid.uuid4().hex[:6]
        wid = self.endpoint(svc, eid, path, direct=True)
        ids = self.join_n(svc, eid, 1)
        did = '%s:%s' % (eid, ids[0])
        d = harness.wait_for(lambda: (lambda x: x if x and x['status'] == 'failed' else None)(
            self.log(eid, wid).get(did)), scaled(20))
        self.assertEqual((d['reason'], d['attempts']), ('refused: not an https URL', 1))
        self.assertEqual(self.rx.got(path), [])

    def test_award_latency_with_stalled_endpoint(self):
        svc = self.start(WEBHOOK_TIMEOUT_MS='5000', WEBHOOK_INFLIGHT='8')

        def timed_awards(eid, n):
            member = '0x' + os.urandom(20).hex()
            self.assertOk(self.call(svc, 'POST', '/api/entities/%s/force-add' % eid,
                                    {'addresses': [member], 'Chain': 'eth'}))
            times = []
            for _ in range(n):
                t = time.monotonic()
                self.assertOk(self.call(svc, 'POST', '/api/entities/%s/contributions' % eid,
                                        {'member': member, 'xp': 1, 'title': 'work',
                                         'skills': []}), 201)
                times.append(time.monotonic() - t)
            return statistics.median(times)

        plain = timed_awards(self.entity(svc), 30)
        eid = self.entity(svc)
        path = '/slow-' + uuid.uuid4().hex[:6]
        self.rx.tell(path, default='stall')
        self.endpoint(svc, eid, path)
        stalled_first = timed_awards(eid, 5)  # the endpoint now holds stalled attempts
        self.rx.wait_got(path, 1, scaled(20))
        stalled = timed_awards(eid, 30)
        self.assertLess(stalled, plain * 3 + 0.05, (plain, stalled_first, stalled))



class Swallower:
    """A DNS server that reads every query and answers none, on 127.53.0.1:53 (a resolver
    names no port), or None where that cannot be bound (not root)."""

    HOST = '127.53.0.1'

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((self.HOST, 53))
        self.sock.settimeout(0.2)
        self.queries, self.stop = 0, False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            try:
                self.sock.recvfrom(4096)
                self.queries += 1
            except socket.timeout:
                pass

    def close(self):
        self.stop = True
        self.t.join(5)
        self.sock.close()


class ResolverStallTest(kit.InstancesCase):
    """An endpoint's host looked up by a resolver that never answers (entityd in a mount
    namespace of its own whose /etc/resolv.conf names the Swallower)."""

    ENV = {'WEBHOOK_TIMEOUT_MS': '500', 'RATE_WRITES_PER_MINUTE': '0'}
    RESOLVER_TIMEOUT_S = 3  # the lookup ends this long after it began, the answer long given

    def setUp(self):
        super().setUp()
        try:
            self.dns = Swallower()
        except OSError as e:
            self.skipTest('cannot bind %s:53: %s' % (Swallower.HOST, e))
        self.addCleanup(self.dns.close)
        d = harness.tmpdir('resolv-')
        conf = os.path.join(d, 'resolv.conf')
        with open(conf, 'w') as f:
            f.write('nameserver %s\noptions timeout:%d attempts:1\n' % (
                Swallower.HOST, self.RESOLVER_TIMEOUT_S))
        self.wrapper = os.path.join(d, 'entityd')
        with open(self.wrapper, 'w') as f:
            f.write('#!/bin/sh\nexec unshare -m sh -c \'mount --bind "$0" /etc/resolv.conf && '
                    'exec "$@"\' %s %s "$@"\n' % (conf, harness.ENTITYD_BIN))
        os.chmod(self.wrapper, 0o755)
        if subprocess.run(['unshare', '-m', 'sh', '-c', 'mount --bind %s /etc/resolv.conf' % conf],
                          capture_output=True).returncode != 0:
            self.skipTest('no mount namespace here (unshare -m needs CAP_SYS_ADMIN)')

    def test_creation_answered_503_at_the_deadline_and_the_late_lookup_harms_nothing(self):
        svc = self.entityd(redis=self.r, env=self.ENV, binary=self.wrapper)
        self.q = harness.Signer(harness.current_message(svc.port)[0]).query(self.owner)
        eid = self.entity(svc)
        t0 = time.monotonic()
        st, h, b = self.call(svc, 'POST', '/api/entities/%s/webhooks' % eid,
                             {'url': 'https://hooks.stalled.example/in'})
        took = time.monotonic() - t0
        self.assertEqual(st, 503, b)
        self.assertEqual(b['error']['code'], 'unavailable', b)
        self.assertIn('retry-after', h)
        self.assertGreater(self.dns.queries, 0)  # the lookup did go to the stalled resolver
        self.assertLess(took, self.RESOLVER_TIMEOUT_S)  # answered before the lookup ended
        # the loop serves meanwhile, and after the lookup's late end the instance is whole
        self.assertOk(self.call(svc, 'GET', '/api/entities/%s' % eid))
        time.sleep(self.RESOLVER_TIMEOUT_S + 1)
        self.assertTrue(svc.alive())
        self.assertOk(self.call(svc, 'GET', '/api/entities/%s/webhooks' % eid))
        self.assertEqual(self.r.cli('HLEN', 'ent:{%s}:webhooks' % eid), 0)


if __name__ == '__main__':
    harness.main()
