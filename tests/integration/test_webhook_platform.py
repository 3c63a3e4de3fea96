"""Platform webhook endpoints' deliveries (CONTRACT section 14: POST /api/webhooks receives the
events of every entity, with an entity endpoint's semantics): a real receiver on loopback
verifies each delivery with the `standardwebhooks` npm package. Events of two entities (one
made after the endpoint), each entity's in order, with its own webhook-id, none from before the
endpoint; a failing delivery retried and marked failed with its reason in GET /api/webhooks/
{wid}/deliveries, sent again by its retry route; the test route; 410 disabling it, and failing
too long; re-enabling it; a rotated secret's two signatures; deleting it stopping its
deliveries; another instance taking over after a SIGKILL of the holder."""

import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
import webhook_kit as kit  # noqa: E402

ENV = {'WEBHOOK_ALLOW_PRIVATE': 'true', 'WEBHOOK_ALLOW_HTTP': 'true', 'WEBHOOK_POLL_MS': '100',
       'WEBHOOK_LEASE_MS': '1500', 'WEBHOOK_RETRY_SCHEDULE': '1s,1s',
       'WEBHOOK_TIMEOUT_MS': '1500', 'RATE_WRITES_PER_MINUTE': '0'}


def by_id(i):
    return [int(x) for x in i.split('-')]


@harness.unittest.skipUnless(kit.available(), 'tests/node tools are not installed')
class WebhookPlatformTest(kit.InstancesCase):

    ENV = ENV

    # ---- helpers ----

    def start(self, **env):
        return super().start(**dict({'PLATFORM_ADMINS': self.owner.address}, **env))

    def endpoint(self, svc, path):
        """A platform endpoint (member.added only) posting to the receiver's path: its id."""
        b = self.assertOk(self.call(svc, 'POST', '/api/webhooks',
                                    {'url': self.rx.url(path), 'events': ['member.added'],
                                     'description': 'platform receiver'}), 201)
        self.rx_secret = b['data']['secret']
        self.rx.tell(path, secrets=[self.rx_secret])
        return b['data']['id']

    def join(self, svc, eid):
        self.assertOk(self.call(svc, 'POST', '/api/entities/%s/force-add' % eid,
                                {'addresses': ['0x' + os.urandom(20).hex()], 'Chain': 'eth'}))

    def added(self, svc, eid):
        b = self.assertOk(self.call(svc, 'GET', '/api/entities/%s/events?limit=1000' % eid))
        return sorted((e['id'] for e in b['data'] if e['type'] == 'member.added'), key=by_id)

    def deliveries(self, svc, wid):
        return self.assertOk(self.call(svc, 'GET', '/api/webhooks/%s/deliveries' % wid))['data']

    # ---- tests ----

    def test_every_entity_in_order_signed(self):
        svc = self.start()
        a = self.entity(svc)
        self.join(svc, a)  # before the endpoint: never delivered
        before = self.added(svc, a)
        time.sleep(0.01)
        path = '/all-' + uuid.uuid4().hex[:6]
        wid = self.endpoint(svc, path)
        b = self.entity(svc)  # made after the endpoint
        for _ in range(3):
            self.join(svc, a)
            self.join(svc, b)
        want = {a: [i for i in self.added(svc, a) if i not in before], b: self.added(svc, b)}
        self.assertEqual((len(want[a]), len(want[b])), (3, 3))
        self.rx.wait_got(path, 6, scaled(30))
        time.sleep(scaled(0.5))
        got = self.rx.got(path)
        self.assertEqual(len(got), 6, got)
        for eid in (a, b):
            mine = [g for g in got if g['id'].startswith(eid + ':')]
            self.assertEqual([g['eventId'] for g in mine], want[eid])
            for g in mine:
                self.assertEqual(g['id'], '%s:%s' % (eid, g['eventId']))
                self.assertEqual(g['verified'], [0], g)
                self.assertEqual(g['type'], 'member.added')
        # the log across entities, newest first, all succeeded
        d = harness.wait_for(lambda: (lambda x: x if len(x) == 6 and all(
            r['status'] == 'succeeded' for r in x) else None)(self.deliveries(svc, wid)),
            scaled(10), what='six deliveries succeeded')
        self.assertEqual(sorted(r['id'] for r in d),
                         sorted('%s:%s' % (e, i) for e in (a, b) for i in want[e]))
        self.assertTrue(all(r['attempts'] == 1 for r in d), d)
        # paged: two rows a page, the cursor the last id
        st, _, p1 = self.call(svc, 'GET', '/api/webhooks/%s/deliveries?limit=2' % wid)
        self.assertEqual((st, len(p1['data'])), (200, 2), p1)
        st, _, p2 = self.call(svc, 'GET', '/api/webhooks/%s/deliveries?limit=2&cursor=%s' %
                              (wid, p1['nextCursor']))
        self.assertEqual((st, len(p2['data'])), (200, 2), p2)
        self.assertFalse({r['id'] for r in p1['data']} & {r['id'] for r in p2['data']})

    def test_failed_with_reason_then_retry_and_test_routes(self):
        svc = self.start()
        path = '/fail-' + uuid.uuid4().hex[:6]
        wid = self.endpoint(svc, path)
        self.rx.tell(path, default='500')
        eid = self.entity(svc)
        self.join(svc, eid)
        self.rx.wait_got(path, 3, scaled(30))

        def failed():
            d = self.deliveries(svc, wid)
            return d if len(d) == 1 and d[0]['status'] == 'failed' else None
        d = harness.wait_for(failed, scaled(10), what='the delivery failed')[0]
        self.assertEqual((d['attempts'], d['reason'], d['responseStatus']), (3, 'HTTP 500', 500))
        self.assertIn('refused by the test receiver', d['responseBody'])
        time.sleep(scaled(1.5))
        self.assertEqual(len(self.rx.got(path)), 3)
        # sent again by the retry route, now answered
        self.rx.tell(path, default='ok')
        st, _, b = self.call(svc, 'POST', '/api/webhooks/%s/deliveries/%s/retry' % (wid, d['id']))
        self.assertEqual((st, b['data']['status']), (200, 'pending'), b)
        got = self.rx.wait_got(path, 4, scaled(20))
        self.assertEqual(got[3]['id'], d['id'])
        self.assertEqual(got[3]['verified'], [0])
        harness.wait_for(lambda: self.deliveries(svc, wid)[0]['status'] == 'succeeded',
                         scaled(10), what='the retry succeeded')
        # an unknown delivery, an unknown endpoint
        st, _, _ = self.call(svc, 'POST', '/api/webhooks/%s/deliveries/%s:1-0/retry' % (wid, eid))
        self.assertEqual(st, 404)
        other = 'wh-' + str(uuid.uuid4())
        st, _, _ = self.call(svc, 'GET', '/api/webhooks/%s/deliveries' % other)
        self.assertEqual(st, 404)
        # the test route: one webhook.test message, written nowhere
        st, _, b = self.call(svc, 'POST', '/api/webhooks/%s/test' % wid)
        self.assertEqual((st, b['data']['status']), (200, 'succeeded'), b)
        got = self.rx.wait_got(path, 5, scaled(20))
        self.assertEqual((got[4]['type'], got[4]['verified']), ('webhook.test', [0]))
        self.assertEqual(len(self.deliveries(svc, wid)), 1)

    def test_410_disables_it(self):
        svc = self.start()
        path = '/gone-' + uuid.uuid4().hex[:6]
        wid = self.endpoint(svc, path)
        self.rx.tell(path, default='410')
        eid = self.entity(svc)
        for _ in range(3):
            self.join(svc, eid)
        self.rx.wait_got(path, 1, scaled(30))

        def disabled():
            rec = json.loads(kit.text(self.r.cli('HGET', 'webhooks:{platform}', wid)))
            return rec if not rec['enabled'] else None
        rec = harness.wait_for(disabled, scaled(10), what='the endpoint disabled')
        self.assertEqual(rec['disabledReason'], 'gone')
        self.join(svc, eid)
        time.sleep(scaled(2))
        self.assertEqual(len(self.rx.got(path)), 1)  # nothing sent while disabled
        # enabled again: from where it stopped, the first one again and the three after it
        self.rx.tell(path, default='ok')
        st, _, b = self.call(svc, 'POST', '/api/webhooks/%s/update' % wid, {'enabled': True})
        self.assertEqual((st, b['data']['enabled']), (200, True), b)
        got = self.rx.wait_got(path, 5, scaled(30))
        self.assertEqual([g['eventId'] for g in got[1:]], self.added(svc, eid))
        self.assertEqual(got[0]['id'], got[1]['id'])

    def test_failing_too_long_disables_it(self):
        svc = self.start(WEBHOOK_DISABLE_AFTER_SECONDS='1',
                         WEBHOOK_RETRY_SCHEDULE='1s,1s,1s,1s,1s,1s')
        path = '/failing-' + uuid.uuid4().hex[:6]
        wid = self.endpoint(svc, path)
        self.rx.tell(path, default='500')
        eid = self.entity(svc)
        self.join(svc, eid)

        def disabled():
            rec = json.loads(kit.text(self.r.cli('HGET', 'webhooks:{platform}', wid)))
            return rec if not rec['enabled'] else None
        rec = harness.wait_for(disabled, scaled(20), what='the endpoint disabled')
        self.assertEqual(rec['disabledReason'], 'failing')
        n = len(self.rx.got(path))
        self.assertGreaterEqual(n, 2)
        time.sleep(scaled(2.5))
        self.assertEqual(len(self.rx.got(path)), n)  # nothing sent while disabled
        self.assertEqual(self.deliveries(svc, wid)[0]['status'], 'pending')

    def test_rotated_secret_signs_beside_the_new(self):
        svc = self.start()
        path = '/rot-' + uuid.uuid4().hex[:6]
        wid = self.endpoint(svc, path)
        old = self.rx_secret
        new = self.assertOk(self.call(svc, 'POST', '/api/webhooks/%s/rotate-secret' %
                                      wid))['data']['secret']
        self.rx.tell(path, secrets=[new, old])
        time.sleep(scaled(0.5))  # a pass (100 ms) reads the new secrets
        eid = self.entity(svc)
        self.join(svc, eid)
        g = self.rx.wait_got(path, 1, scaled(30))[0]
        self.assertEqual(len(g['signatures']), 2)
        self.assertEqual(g['verified'], [0, 1])

    def test_delete_stops_its_deliveries(self):
        svc = self.start()
        path = '/del-' + uuid.uuid4().hex[:6]
        wid = self.endpoint(svc, path)
        eid = self.entity(svc)
        self.join(svc, eid)
        self.rx.wait_got(path, 1, scaled(30))
        self.assertOk(self.call(svc, 'DELETE', '/api/webhooks/%s' % wid))
        time.sleep(scaled(0.5))  # a pass (100 ms) reads it gone
        for _ in range(2):
            self.join(svc, eid)
        other = self.entity(svc)
        self.join(svc, other)
        time.sleep(scaled(2))
        self.assertEqual(len(self.rx.got(path)), 1)

    def test_sigkill_of_the_holder_taken_over(self):
        a = self.start()
        eid = self.entity(a)
        path = '/kill-' + uuid.uuid4().hex[:6]
        self.rx.tell(path, script=['stall'])
        self.endpoint(a, path)
        for _ in range(4):
            self.join(a, eid)
        ids = self.added(a, eid)
        first = self.rx.wait_got(path, 1, scaled(30))[0]  # a's attempt, stalled
        self.assertEqual(first['eventId'], ids[0])
        b = self.start()
        a.kill()

        def all_there():
            got = self.rx.got(path)
            ok = {g['eventId'] for g in got if g['answer'] == 'ok'}
            return got if ok >= set(ids) else None
        got = harness.wait_for(all_there, scaled(30), interval=0.1, what='every event')
        self.assertTrue(all(g['verified'] == [0] for g in got), got)
        # b made the stalled one again: the same webhook-id
        self.assertEqual([g['id'] for g in got].count('%s:%s' % (eid, ids[0])), 2)
        self.assertTrue(b.alive())


if __name__ == '__main__':
    harness.main()
