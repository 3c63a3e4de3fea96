"""Event streams against a local Redis Cluster (rcluster.py), two instances A and B: a stream
open on A gets the events written through B, for entities whose keys live on different nodes
(the watch's tracking is per node), and resumes with Last-Event-ID there too."""

import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import rcluster  # noqa: E402
from harness import scaled  # noqa: E402
from test_streams import Sse  # noqa: E402


class ClusterStreamsTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.cl = rcluster.RedisCluster()
        cls.a = cls.class_entityd(redis=cls.cl)
        cls.b = cls.class_entityd(redis=cls.cl)
        cls.signer = harness.Signer(harness.current_message(cls.a.port)[0])
        cls.owner = harness.Wallet.random(1)[0]
        for svc in (cls.a, cls.b):
            harness.wait_for(lambda: harness.read_cache_metrics(svc.port).get(
                'entityd_read_cache_enabled') == 1, scaled(20), what='read cache on')

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.cl.kill()

    def entity(self):
        body = {'name': 'C %s' % uuid.uuid4().hex[:8], 'description': '',
                'ownerAddresses': [self.owner.address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'public': True}
        st, _, b = harness.request(self.a.port, 'POST', '/api/entities?' +
                                   self.signer.query(self.owner), body)
        self.assertEqual(st, 201, b)
        return b['data']['id']

    def add_member(self, svc, eid):
        st, _, b = harness.request(svc.port, 'POST', '/api/entities/%s/force-add?%s' % (
            eid, self.signer.query(self.owner)),
            {'addresses': [harness.Wallet.random(1)[0].address], 'Chain': 'eth'})
        self.assertEqual(st, 200, b)

    def kept(self, eid):
        node = self.cl.primary_of('ent:{%s}:events' % eid)
        return [rcluster._decode(i) for i, _ in node.cli('XRANGE', 'ent:{%s}:events' % eid,
                                                         '-', '+')]

    def open(self, svc, eid, headers=None):
        s = Sse(svc.port, '/api/entities/%s/events/stream?%s' % (
            eid, self.signer.query(self.owner)), headers)
        self.assertEqual(s.read_head(), 200)
        return s

    def test_events_written_elsewhere_reach_streams_on_every_node(self):
        # entities until their events keys sit on at least two primaries
        eids, nodes = [], set()
        for _ in range(12):
            eid = self.entity()
            eids.append(eid)
            nodes.add(self.cl.primary_of('ent:{%s}:events' % eid).port)
            if len(nodes) >= 2 and len(eids) >= 3:
                break
        self.assertGreaterEqual(len(nodes), 2)
        streams = {eid: self.open(self.a, eid) for eid in eids}
        try:
            for eid in eids:
                self.add_member(self.b, eid)
            for eid, s in streams.items():
                ev = s.next_event(scaled(5))
                self.assertEqual((ev['event'], ev['id']), ('member.added', self.kept(eid)[-1]))
            # again: the watch read each key again to stay tracked
            for eid in eids:
                self.add_member(self.b, eid)
            for eid, s in streams.items():
                self.assertEqual(s.next_event(scaled(5))['id'], self.kept(eid)[-1])
        finally:
            for s in streams.values():
                s.close()
        eid = eids[0]
        ids = self.kept(eid)
        s = self.open(self.b, eid, {'Last-Event-ID': ids[0]})
        self.assertEqual([s.next_event(scaled(5))['id'] for _ in ids[1:]], ids[1:])
        s.close()


if __name__ == '__main__':
    harness.main()
