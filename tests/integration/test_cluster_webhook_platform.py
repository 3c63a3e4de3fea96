"""A platform webhook endpoint against a local Redis Cluster (rcluster.py): its record lives in
the {platform} slot, its lease in its own, its deliveries in each entity's slot, on different
nodes; two instances A and B, events written through B. The receiver (tests/node/
webhook_receiver.cjs) verifies every delivery with the `standardwebhooks` package."""

import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import rcluster  # noqa: E402
from harness import scaled  # noqa: E402
import webhook_kit as kit  # noqa: E402

ENV = {'WEBHOOK_ALLOW_PRIVATE': 'true', 'WEBHOOK_ALLOW_HTTP': 'true', 'WEBHOOK_POLL_MS': '100',
       'WEBHOOK_LEASE_MS': '1500', 'RATE_WRITES_PER_MINUTE': '0'}


@harness.unittest.skipUnless(kit.available(), 'tests/node tools are not installed')
class ClusterWebhookPlatformTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.owner = harness.Wallet.random(1)[0]
        cls.cl = rcluster.RedisCluster()
        env = dict(ENV, PLATFORM_ADMINS=cls.owner.address)
        cls.a = cls.class_entityd(redis=cls.cl, env=env)
        cls.b = cls.class_entityd(redis=cls.cl, env=env)
        cls.signer = harness.Signer(harness.current_message(cls.a.port)[0])
        cls.rx = kit.Receiver()

    @classmethod
    def tearDownClass(cls):
        cls.rx.stop()
        super().tearDownClass()
        cls.cl.kill()

    def call(self, svc, method, path, body=None):
        path += ('&' if '?' in path else '?') + self.signer.query(self.owner)
        return harness.request(svc.port, method, path, body=body, timeout=scaled(20))

    def entity(self):
        body = {'name': 'C %s' % uuid.uuid4().hex[:8], 'description': '',
                'ownerAddresses': [self.owner.address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'public': True}
        return self.assertOk(self.call(self.a, 'POST', '/api/entities', body), 201)['data']['id']

    def test_entities_on_every_node_delivered(self):
        path = '/cl-' + uuid.uuid4().hex[:6]
        b = self.assertOk(self.call(self.a, 'POST', '/api/webhooks',
                                    {'url': self.rx.url(path), 'events': ['member.added']}), 201)
        wid = b['data']['id']
        self.rx.tell(path, secrets=[b['data']['secret']])
        eids, nodes = [], set()
        for _ in range(12):
            eid = self.entity()
            eids.append(eid)
            nodes.add(self.cl.primary_of('ent:{%s}:events' % eid).port)
            if len(nodes) >= 2 and len(eids) >= 3:
                break
        self.assertGreaterEqual(len(nodes), 2)
        for _ in range(2):
            for eid in eids:
                self.assertOk(self.call(self.b, 'POST', '/api/entities/%s/force-add' % eid,
                                        {'addresses': ['0x' + os.urandom(20).hex()],
                                         'Chain': 'eth'}))
        got = self.rx.wait_got(path, 2 * len(eids), scaled(30))
        self.assertTrue(all(g['verified'] == [0] for g in got), got)
        self.assertEqual(sorted({g['id'].split(':')[0] for g in got}), sorted(eids))
        for eid in eids:
            mine = [g['eventId'] for g in got if g['id'].startswith(eid + ':')]
            self.assertEqual(mine, sorted(mine, key=lambda i: [int(x) for x in i.split('-')]))
        d = harness.wait_for(lambda: (lambda x: x if len(x) == 2 * len(eids) and all(
            r['status'] == 'succeeded' for r in x) else None)(self.assertOk(self.call(
                self.b, 'GET', '/api/webhooks/%s/deliveries?limit=100' % wid))['data']),
            scaled(10), what='every delivery listed, succeeded')
        self.assertEqual(sorted(r['id'] for r in d), sorted(g['id'] for g in got))


if __name__ == '__main__':
    harness.main()
