"""Webhook delivery (CONTRACT section 14, "Delivery", "At least once", "Deliveries"): every
event an endpoint subscribes to reaches a real receiver on loopback that verifies each delivery
with the `standardwebhooks` npm package: headers and signatures, event order, a retry after a
failure, 410 disabling, a Retry-After pause, a rotated secret's two signatures, re-enabling
delivering from where it stopped, the delivery log and its retry and test routes."""

import json
import os
import re
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
import webhook_kit as kit  # noqa: E402

# Short schedules and leases: a retry a second on, a lease of 1.5 s.
ENV = {'WEBHOOK_ALLOW_PRIVATE': 'true', 'WEBHOOK_ALLOW_HTTP': 'true', 'WEBHOOK_POLL_MS': '100',
       'WEBHOOK_LEASE_MS': '1500', 'WEBHOOK_RETRY_SCHEDULE': '1s,1s', 'WEBHOOK_TIMEOUT_MS': '2000',
       'WEBHOOK_LOG_MAX': '10', 'RATE_WRITES_PER_MINUTE': '0'}


@harness.unittest.skipUnless(kit.available(), 'tests/node tools are not installed')
class WebhookDeliveryTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.owner, cls.m1, cls.m2 = harness.Wallet.random(3)
        cls.svc = cls.class_entityd(redis=cls.r, env=ENV)
        cls.port = cls.svc.port
        cls.q = harness.Signer(harness.current_message(cls.port)[0]).query(cls.owner)
        cls.rx = kit.Receiver()

    @classmethod
    def tearDownClass(cls):
        cls.rx.stop()
        super().tearDownClass()

    # ---- helpers ----

    def call(self, method, path, body=None, port=None):
        path += ('&' if '?' in path else '?') + self.q
        return harness.request(port or self.port, method, path, body=body, timeout=scaled(20))

    def entity(self):
        body = {'name': 'Guild ' + uuid.uuid4().hex[:6], 'description': '',
                'ownerAddresses': [self.owner.address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'public': True}
        return self.assertOk(self.call('POST', '/api/entities', body), 201)['data']['id']

    def endpoint(self, eid, path, events=()):
        """(wid, secret) of a new endpoint of eid posting to the receiver's path."""
        wid, secret = kit.make_endpoint(self.call, eid, self.rx.url(path), events=events)
        self.rx.tell(path, secrets=[secret])
        return wid, secret

    def join_n(self, eid, n):
        """n member.added events."""
        addrs = ['0x' + os.urandom(20).hex() for _ in range(n)]
        for a in addrs:
            self.assertOk(self.call('POST', '/api/entities/%s/force-add' % eid,
                                    {'addresses': [a], 'Chain': 'eth'}))
        return addrs

    def events(self, eid):
        b = self.assertOk(self.call('GET', '/api/entities/%s/events?limit=1000' % eid))
        return sorted(b['data'], key=lambda e: [int(x) for x in e['id'].split('-')])

    def log(self, eid, wid):
        raw = self.r.cli('HGETALL', 'ent:{%s}:wh:%s:log' % (eid, wid))
        import json
        return {kit.text(raw[i]): json.loads(kit.text(raw[i + 1])) for i in range(0, len(raw), 2)}

    # ---- tests ----

    def test_signed_headers_and_order(self):
        eid = self.entity()
        time.sleep(0.01)
        path = '/order-' + uuid.uuid4().hex[:6]
        self.endpoint(eid, path)
        self.join_n(eid, 6)
        want = [e for e in self.events(eid) if e['type'] == 'member.added']
        self.assertEqual(len(want), 6)
        got = self.rx.wait_got(path, 6, scaled(20))
        self.assertEqual([g['eventId'] for g in got], [e['id'] for e in want])
        for g, e in zip(got, want):
            self.assertEqual(g['verified'], [0], g)
            self.assertEqual(g['id'], '%s:%s' % (eid, e['id']))
            self.assertEqual(g['type'], 'member.added')
            self.assertTrue(g['contentType'].startswith('application/json'))
            self.assertLessEqual(abs(int(g['timestamp']) - g['at'] / 1000), 5)
            self.assertEqual(len(g['signatures']), 1)
            self.assertTrue(g['signatures'][0].startswith('v1,'))
        log = self.log(eid, self.wid_of(eid))
        self.assertEqual(len(log), 6)
        self.assertTrue(all(d['status'] == 'succeeded' and d['attempts'] == 1
                            for d in log.values()), log)

    def wid_of(self, eid):
        return next(k for k in map(kit.text, self.r.cli('HKEYS', 'ent:{%s}:webhooks' % eid))
                    if not k.startswith('sec:'))

    def test_events_filter(self):
        eid = self.entity()
        path = '/filter-' + uuid.uuid4().hex[:6]
        self.endpoint(eid, path, events=['admin.added'])
        self.join_n(eid, 2)
        self.assertOk(self.call('POST', '/api/entities/%s/admins' % eid,
                                {'addresses': [self.m1.address]}))
        got = self.rx.wait_got(path, 1, scaled(20))
        time.sleep(scaled(1))
        got = self.rx.got(path)
        self.assertEqual([g['type'] for g in got], ['admin.added'])

    def test_retry_after_failure_does_not_hold_back_the_rest(self):
        eid = self.entity()
        path = '/retry-' + uuid.uuid4().hex[:6]
        wid, _ = self.endpoint(eid, path)
        self.rx.tell(path, script=['500'])
        self.join_n(eid, 3)
        ids = [e['id'] for e in self.events(eid) if e['type'] == 'member.added']
        got = self.rx.wait_got(path, 4, scaled(20))
        # the first failed, the next two went on, then the first again about a second later
        self.assertEqual([g['eventId'] for g in got], [ids[0], ids[1], ids[2], ids[0]])
        self.assertEqual(got[0]['id'], got[3]['id'])
        self.assertNotEqual(got[0]['timestamp'], None)
        self.assertGreaterEqual(got[3]['at'] - got[0]['at'], 700)
        self.assertTrue(all(g['verified'] == [0] for g in got))
        d = self.log(eid, wid)['%s:%s' % (eid, ids[0])]
        harness.wait_for(lambda: self.log(eid, wid)['%s:%s' % (eid, ids[0])]['status'] ==
                         'succeeded', scaled(10))
        d = self.log(eid, wid)['%s:%s' % (eid, ids[0])]
        self.assertEqual(d['attempts'], 2)

    def test_schedule_end_marks_failed_with_reason(self):
        eid = self.entity()
        path = '/fail-' + uuid.uuid4().hex[:6]
        wid, _ = self.endpoint(eid, path)
        self.rx.tell(path, default='500')
        self.join_n(eid, 1)
        self.rx.wait_got(path, 3, scaled(20))
        did = next(iter(self.log(eid, wid)))
        d = harness.wait_for(lambda: (lambda x: x if x['status'] == 'failed' else None)(
            self.log(eid, wid)[did]), scaled(10))
        self.assertEqual(d['attempts'], 3)
        self.assertEqual(d['reason'], 'HTTP 500')
        self.assertEqual(d['responseStatus'], 500)
        self.assertIn('refused by the test receiver', d['responseBody'])
        time.sleep(scaled(1.5))
        self.assertEqual(len(self.rx.got(path)), 3)

    def test_readme_receiver(self):
        """The README's ten-line receiver, as written there, verifies and logs deliveries."""
        with open(os.path.join(harness.REPO, 'README.md')) as f:
            readme = f.read()
        code = re.search(r'## Push: webhooks and event streams.*?```js\n(.*?)```', readme,
                         re.S).group(1)
        self.assertLessEqual(len(code.strip().splitlines()), 10)
        port = harness.free_port()
        self.assertIn('.listen(3000)', code)
        eid = self.entity()
        wid, secret = kit.make_endpoint(self.call, eid, 'http://127.0.0.1:%d/hook' % port)
        run = code.replace('.listen(3000)', '.listen(%d)' % port)
        proc = subprocess.Popen([kit.NODE, '-e', run],
                                cwd=kit.NODE_DIR, env=dict(os.environ, WEBHOOK_SECRET=secret),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(scaled(0.5))  # listening; a delivery before it is retried anyway
            addrs = self.join_n(eid, 2)
            def delivered():
                d = self.log(eid, wid)
                ok = [x for x in d.values() if x['status'] == 'succeeded']
                return ok if len(ok) >= 2 else None
            harness.wait_for(delivered, scaled(20), what='two deliveries the README receiver took')
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=scaled(10))
        lines = [ln for ln in out.splitlines() if ln.startswith('member.added ' + eid)]
        self.assertEqual(len(lines), 2, (out, err))
        self.assertTrue(all(a in out for a in addrs), out)  # the data, as the receiver logs it

    def test_410_disables_at_once(self):
        eid = self.entity()
        path = '/gone-' + uuid.uuid4().hex[:6]
        wid, _ = self.endpoint(eid, path)
        self.rx.tell(path, default='410')
        self.join_n(eid, 3)
        self.rx.wait_got(path, 1, scaled(20))
        rec = harness.wait_for(lambda: (lambda r: r if not r['enabled'] else None)(
            kit.endpoint_record(self.r, eid, wid)), scaled(10))
        self.assertEqual(rec['disabledReason'], 'gone')
        disabled = [e for e in self.events(eid) if e['type'] == 'webhook.disabled']
        self.assertEqual(len(disabled), 1)
        self.assertEqual(disabled[0]['data']['webhookId'], wid)
        time.sleep(scaled(2))
        self.assertEqual(len(self.rx.got(path)), 1)  # nothing sent while disabled
        # Enabled again: from where it stopped, the first one again and the two after it (the
        # webhook.disabled event comes among them when the first was sent before the others
        # were written, as it may).
        self.rx.tell(path, default='ok')
        kit.enable(self.call, eid, wid)
        ids = [e['id'] for e in self.events(eid) if e['type'] == 'member.added']
        added = lambda g: g['type'] == 'member.added'  # noqa: E731
        got = self.rx.wait_got(path, 4, scaled(20), pred=added)
        self.assertEqual([g['eventId'] for g in got[1:4]], ids)

    def test_retry_after_pauses_the_endpoint(self):
        eid = self.entity()
        path = '/pause-' + uuid.uuid4().hex[:6]
        self.endpoint(eid, path)
        self.rx.tell(path, script=['429:3'])
        self.join_n(eid, 2)
        got = self.rx.wait_got(path, 3, scaled(30))
        # nothing at all for 3 s after the 429, then both
        self.assertGreaterEqual(got[1]['at'] - got[0]['at'], 2900)
        self.assertEqual(got[1]['eventId'], got[0]['eventId'])

    def test_rotated_secret_signs_beside_the_new(self):
        eid = self.entity()
        path = '/rot-' + uuid.uuid4().hex[:6]
        wid, old = self.endpoint(eid, path)
        new = self.assertOk(self.call('POST', '/api/entities/%s/webhooks/%s/rotate-secret' %
                                      (eid, wid)))['data']['secret']
        self.rx.tell(path, secrets=[new, old])
        self.join_n(eid, 1)
        g = self.rx.wait_got(path, 1, scaled(20))[0]
        self.assertEqual(len(g['signatures']), 2)
        self.assertEqual(g['verified'], [0, 1])
        # Past the previous one's end (24 h on: its end moved to now), the new one alone.
        key = 'ent:{%s}:webhooks' % eid
        field = kit.text(self.r.cli('HGET', key, 'sec:' + wid)).split(' ')
        self.assertEqual(field[:2], [new, old])
        self.r.cli('HSET', key, 'sec:' + wid,
                   '%s %s %d' % (new, old, int(time.time() * 1000) - 1))
        self.join_n(eid, 1)
        g = self.rx.wait_got(path, 2, scaled(20))[1]
        self.assertEqual(len(g['signatures']), 1)
        self.assertEqual(g['verified'], [0])

    def test_log_retry_and_test_routes(self):
        eid = self.entity()
        path = '/log-' + uuid.uuid4().hex[:6]
        wid, _ = self.endpoint(eid, path)
        self.rx.tell(path, script=['500'])
        ids = [e for e in self.join_n(eid, 3)]
        ids = [e['id'] for e in self.events(eid) if e['type'] == 'member.added']
        self.rx.wait_got(path, 4, scaled(20))
        base = '/api/entities/%s/webhooks/%s' % (eid, wid)
        harness.wait_for(lambda: all(d['status'] == 'succeeded' for d in self.log(eid, wid).values()),
                         scaled(10))
        b = self.assertOk(self.call('GET', base + '/deliveries?limit=2'))
        self.assertEqual([d['eventId'] for d in b['data']], [ids[2], ids[1]])
        self.assertEqual(b['nextCursor'], '%s:%s' % (eid, ids[1]))
        b2 = self.assertOk(self.call('GET', base + '/deliveries?limit=2&cursor=' + b['nextCursor']))
        self.assertEqual([d['eventId'] for d in b2['data']], [ids[0]])
        self.assertIsNone(b2['nextCursor'])
        first = b2['data'][0]
        self.assertEqual(first['id'], '%s:%s' % (eid, ids[0]))
        self.assertEqual((first['attempts'], first['status'], first['responseStatus'],
                          first['type']), (2, 'succeeded', 204, 'member.added'))
        self.assertIsNone(first['responseBody'])
        self.assertIsNone(first['reason'])
        # retry: sent again now with the same webhook-id, pending until it succeeds
        r = self.assertOk(self.call('POST', base + '/deliveries/%s/retry' % first['id']))
        self.assertEqual(r['data']['status'], 'pending')
        got = self.rx.wait_got(path, 5, scaled(20))
        self.assertEqual(got[4]['id'], first['id'])
        self.assertEqual(got[4]['verified'], [0])
        # test: a webhook.test to this endpoint alone, not logged
        t = self.assertOk(self.call('POST', base + '/test'))
        self.assertEqual(t['data'], {'status': 'succeeded', 'responseStatus': 204,
                                     'reason': None})
        got = self.rx.wait_got(path, 6, scaled(20))
        self.assertEqual(got[5]['type'], 'webhook.test')
        self.assertEqual(got[5]['verified'], [0])
        self.assertTrue(got[5]['id'].startswith(eid + ':'))
        self.assertEqual(len(self.log(eid, wid)), 3)
        self.rx.tell(path, script=['503'])
        t = self.assertOk(self.call('POST', base + '/test'))
        self.assertEqual(t['data'], {'status': 'failed', 'responseStatus': 503,
                                     'reason': 'HTTP 503'})
        # unknown ids, malformed cursor, and another caller
        self.assertEnvelope(self.call('GET', '/api/entities/%s/webhooks/wh-%s/deliveries' %
                                      (eid, uuid.uuid4())), 404, 'not_found')
        self.assertEnvelope(self.call('POST', base + '/deliveries/%s:1-1/retry' % eid), 404,
                            'not_found')
        self.assertEnvelope(self.call('GET', base + '/deliveries?cursor=x'), 400,
                            'invalid_request', 'cursor')
        q = harness.Signer(harness.current_message(self.port)[0]).query(self.m2)
        st, _, body = harness.request(self.port, 'GET', base + '/deliveries?' + q)
        self.assertEqual(st, 403, body)
        st, _, body = harness.request(self.port, 'POST', base + '/test?' + q)
        self.assertEqual(st, 403, body)
        self.assertEqual(len(self.rx.got(path)), 7)

    def test_log_bounded_and_counted(self):
        eid = self.entity()
        path = '/bound-' + uuid.uuid4().hex[:6]
        wid, _ = self.endpoint(eid, path)
        before = int(kit.text(self.r.cli('HGET', 'ent:{%s}' % eid, 'eventBytes')) or 0)
        self.join_n(eid, 13)
        self.rx.wait_got(path, 13, scaled(30))
        harness.wait_for(lambda: len(self.log(eid, wid)) == 10, scaled(10))
        log = self.log(eid, wid)
        kept = sorted(d['eventId'] for d in log.values())
        ids = [e['id'] for e in self.events(eid) if e['type'] == 'member.added']
        self.assertEqual(set(kept), set(ids[3:]))  # the oldest went
        self.assertEqual(int(kit.text(self.r.cli('ZCARD', 'ent:{%s}:wh:%s:order' % (eid, wid)))), 10)
        size = int(kit.text(self.r.cli('HGET', 'ent:{%s}:wh:%s' % (eid, wid), 'bytes')))
        self.assertGreater(size, sum(len(json.dumps(d)) for d in log.values()) * 0.9)
        after = int(kit.text(self.r.cli('HGET', 'ent:{%s}' % eid, 'eventBytes')))
        # the entity's byte count took the events and the log's growth
        self.assertGreater(after - before, size)
        m = harness.request(self.port, 'GET', '/metrics')[2].decode()
        self.assertRegex(m, r'entityd_webhook_deliveries_total\{outcome="succeeded"\} [1-9]')
        self.assertIn('entityd_webhook_oldest_pending_seconds', m)
        self.assertIn('entityd_webhook_endpoints_disabled', m)

    def test_deleted_entity_stops_and_its_entry_goes(self):
        eid = self.entity()
        path = '/del-' + uuid.uuid4().hex[:6]
        wid, _ = self.endpoint(eid, path)
        self.join_n(eid, 1)
        self.rx.wait_got(path, 1, scaled(20))
        self.assertOk(self.call('DELETE', '/api/entities/%s' % eid))
        entry = '%s:%s' % (eid, wid)
        harness.wait_for(lambda: self.r.cli('ZSCORE', 'webhooks', entry) is None, scaled(10))
        self.assertEqual(len(self.rx.got(path)), 1)

    def test_reenabled_after_trim_marks_the_trimmed_failed(self):
        eid = self.entity()
        path = '/trim-' + uuid.uuid4().hex[:6]
        wid, _ = self.endpoint(eid, path)
        self.join_n(eid, 1)
        self.rx.wait_got(path, 1, scaled(20))
        self.rx.tell(path, default='410')
        self.join_n(eid, 1)
        harness.wait_for(lambda: not kit.endpoint_record(self.r, eid, wid)['enabled'], scaled(10))
        self.join_n(eid, 3)  # while disabled
        ids = [e['id'] for e in self.events(eid) if e['type'] == 'member.added']
        # the log keeps the newest two: the 410'd one and the first two made while disabled go
        self.r.cli('XTRIM', 'ent:{%s}:events' % eid, 'MAXLEN', '2')
        self.rx.tell(path, default='ok')
        kit.enable(self.call, eid, wid)
        got = self.rx.wait_got(path, 4, scaled(20))
        self.assertEqual([g['eventId'] for g in got[2:]], ids[3:])
        # the one pending at the 410 (once due again), and the ones never taken as one record
        gone = harness.wait_for(lambda: (lambda g: g if len(g) == 2 else None)(
            [d for d in self.log(eid, wid).values() if d['reason'] == 'trimmed']), scaled(10))
        self.assertTrue(all(d['status'] == 'failed' for d in gone))
        self.assertEqual(sorted(d['id'] for d in gone),
                         ['%s:%s' % (eid, ids[1]), '%s:%s:trimmed' % (eid, ids[1])])
        self.assertEqual(len(self.rx.got(path)), 4)
        base = '/api/entities/%s/webhooks/%s' % (eid, wid)
        page = self.assertOk(self.call('GET', base + '/deliveries?limit=10'))['data']
        at = [d['id'] for d in page].index('%s:%s:trimmed' % (eid, ids[1]))
        self.assertIsNone(page[at]['eventId'])
        # a page may end on it
        self.assertOk(self.call('GET', base + '/deliveries?limit=1&cursor=' + page[at]['id']))
        self.assertEnvelope(self.call('POST', base + '/deliveries/%s:%s:trimmed/retry' %
                                      (eid, ids[1])), 409, 'conflict')


if __name__ == '__main__':
    harness.main()
