"""The read cache in cluster mode, against a local Redis Cluster (rcluster.py) and two instances
(A and B, both with the cache on): a repeated read costs the cluster nothing; a write through
either instance is seen by the other once its invalidation arrives and by the writer at once;
losing a node's invalidation connection turns the cache off and empties it until it is back; a
slot moved by a reshard or a failover leaves no stale answer behind."""

import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import rcluster  # noqa: E402
from harness import scaled  # noqa: E402
from invariants import check_invariants  # noqa: E402
from test_entities import EntityCase, make_callers, ekey, rand_tag  # noqa: E402

read_cache_metrics = harness.read_cache_metrics

# Commands the instances send on their own, not for a request: the heartbeat through each
# node (PUBLISH) and the slot map asked every second while the cache is on; and the test's own
# INFO.
UPKEEP = {'publish', 'cluster|slots', 'info'}


def commandstats(node):
    return harness.commandstats(rcluster._decode(node.cli('INFO', 'commandstats')))


def cluster_commandstats(cl):
    """{command: calls} summed over every live node."""
    total = {}
    for n in cl.live():
        for k, v in commandstats(n).items():
            total[k] = total.get(k, 0) + v
    return total


def delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in after
            if after[k] != before.get(k, 0) and k not in UPKEEP}


def wait_cluster_quiet(cl, what):
    """Until the nodes ran no command but upkeep between two looks 0.2 s apart: the index
    writes a write sends beside its answer (CONTRACT section 9) have landed, and will not count
    in the next read."""
    harness.wait_still(lambda: cluster_commandstats(cl), delta, what)


def subscribers(node):
    return set(re.findall(r'^id=(\d+) ', rcluster._decode(
        node.cli('CLIENT', 'LIST', 'TYPE', 'pubsub')), re.M))


class ClusterReadCacheTest(EntityCase):

    def setUp(self):
        super().setUp()
        self.cl = rcluster.RedisCluster()
        self.addCleanup(self.cl.kill)
        self.a = self.entityd(redis=self.cl)
        self.b = self.entityd(redis=self.cl)
        self.port = self.a.port
        for svc in (self.a, self.b):
            self.wait_enabled(svc)
            # an instance's start-up look at the find backfill (retried while another holds
            # its lease) must not land in a test's count of what the cluster ran
            harness.wait_for(lambda: b'entityd_find_backfill_done 1' in
                             harness.request(svc.port, 'GET', '/metrics')[2], scaled(20),
                             what='the instance past its backfill check')
        self.c = make_callers(self.a.port, ('owner', 'reader'))

    def enabled(self, svc):
        return read_cache_metrics(svc.port).get('entityd_read_cache_enabled')

    def wait_enabled(self, svc, timeout=10):
        harness.wait_for(lambda: self.enabled(svc) == 1, scaled(timeout), what='read cache on')

    def hits(self, svc):
        return read_cache_metrics(svc.port)['entityd_read_cache_total{outcome="hit"}']

    def name(self, svc, eid):
        return self.get_entity(eid, self.c['reader'], port=svc.port)

    def eventually(self, fn, check, what, timeout=2):
        """fn() until check(result) holds: an instance hears of another's write through the
        node's invalidation message, which races the next request by microseconds."""
        out = {}

        def ok():
            out['r'] = fn()
            return check(out['r'])
        harness.wait_for(ok, scaled(timeout), what=what)
        return out['r']

    def named(self, name):
        return lambda r: r[0] == 200 and r[2]['data']['name'] == name

    def warm(self, eid, *svcs):
        for svc in svcs:
            for _ in range(2):
                self.assertOk(self.name(svc, eid))

    def test_repeated_reads_cost_the_cluster_nothing(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        self.warm(eid, self.a)
        self.assertOk(self.get_entity(eid, c['reader'], signed=False))
        hits = self.hits(self.a)
        before = cluster_commandstats(self.cl)
        for _ in range(5):
            self.assertEqual(self.assertOk(self.name(self.a, eid))['data']['id'], eid)
            self.assertOk(self.get_entity(eid, c['reader'], signed=False))
        self.assertEqual(delta(before, cluster_commandstats(self.cl)), {})
        # Per signed read the revocation check and the entity, per unsigned one the entity.
        self.assertEqual(self.hits(self.a), hits + 15)
        # A write through this instance: seen by its next read at once, read again tracked.
        self.assertOk(self.update(c['owner'], eid, [c['owner'].address], name='Renamed'))
        # The rename drops the old name's directory entry beside its answer: on a loaded
        # machine that script can reach its node after the answer (seen, --loaded).
        wait_cluster_quiet(self.cl, "the rename's index drop")
        before = cluster_commandstats(self.cl)
        self.assertEqual(self.assertOk(self.name(self.a, eid))['data']['name'], 'Renamed')
        self.assertEqual(delta(before, cluster_commandstats(self.cl)),
                         {'client|caching': 1, 'hmget': 1})
        self.assertEqual(check_invariants(self.cl), [])

    def test_write_through_either_instance_is_seen_on_both(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        self.warm(eid, self.a, self.b)
        for via, other in ((self.a, self.b), (self.b, self.a)):
            name = 'Via %d %s' % (via.port, rand_tag())
            self.assertOk(self.update(c['owner'], eid, [c['owner'].address], name=name,
                                      port=via.port))
            self.assertEqual(self.assertOk(self.name(via, eid))['data']['name'], name)
            self.eventually(lambda: self.name(other, eid), self.named(name),
                            'the other instance seeing the update')
            self.warm(eid, other)
        # A raw write on the node that owns the entity: both hear it from that node.
        node = self.cl.primary_of(ekey(eid))
        stored = json.loads(rcluster._decode(node.cli('HGET', ekey(eid), 'json')))
        stored['name'] = 'Raw ' + stored['name']
        node.cli('HSET', ekey(eid), 'json', json.dumps(stored), 'name', stored['name'])
        for svc in (self.a, self.b):
            self.eventually(lambda: self.name(svc, eid),
                            lambda r: r[0] == 200 and r[2]['data']['name'].startswith('Raw '),
                            'the raw write')
        self.assertEqual(check_invariants(self.cl), [])

    def test_lost_invalidation_connection_turns_the_cache_off(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        self.warm(eid, self.b)
        node = self.cl.primary_of(ekey(eid))
        old = subscribers(node)
        self.assertEqual(len(old), 2, old)  # one per instance on this node
        offs = sum(1 for l in self.b.logs() if l.get('msg') == 'read cache off')
        node.cli('CLIENT', 'KILL', 'TYPE', 'pubsub')
        # A write no invalidation connection of this node hears: B must not keep its answer.
        self.assertOk(self.update(c['owner'], eid, [c['owner'].address], name='Unheard'))
        harness.wait_for(lambda: len(subscribers(node) - old) == 2, scaled(10),
                         what='both invalidation connections back on that node')
        for svc in (self.a, self.b):
            self.wait_enabled(svc)
        self.assertGreater(sum(1 for l in self.b.logs() if l.get('msg') == 'read cache off'),
                           offs)
        self.assertEqual(self.assertOk(self.name(self.b, eid))['data']['name'], 'Unheard')
        # And it caches again.
        self.warm(eid, self.b)
        hits = self.hits(self.b)
        self.assertOk(self.name(self.b, eid))
        self.assertGreater(self.hits(self.b), hits)
        self.assertEqual(check_invariants(self.cl), [])

    def test_reshard_leaves_no_stale_read(self):
        """A's answer for an entity is kept; its slot moves to another primary (MIGRATE, then
        SETSLOT); B writes it on the new owner. A's next reads find the new name."""
        c = self.c
        eid = self.create(c['owner'])['id']
        self.warm(eid, self.a, self.b)
        slot = rcluster.key_slot(eid)
        src = self.cl.primary_of(ekey(eid))
        dst = next(p for p in self.cl.primaries() if p is not src)
        asks = {}

        def window(src, dst):
            # The keys move before the slot does: MIGRATE deletes them on src, which tells A;
            # then A's reads meet ASK and are never kept.
            invalidations = lambda: read_cache_metrics(self.a.port)[
                'entityd_read_cache_invalidations_total']
            seen = invalidations()
            keys = src.cli('CLUSTER', 'GETKEYSINSLOT', slot, 1000)
            src.cli('MIGRATE', '127.0.0.1', dst.port, '', 0, 5000, 'KEYS', *keys)
            harness.wait_for(lambda: invalidations() > seen, scaled(2),
                             what='the move heard as an invalidation')
            hits = self.hits(self.a)
            for _ in range(3):
                self.assertOk(self.name(self.a, eid))
            asks['hits'] = self.hits(self.a) - hits

        self.cl.migrate_slot(slot, dst, keys_first=window)
        self.assertIs(self.cl.primary_of(ekey(eid)), dst)
        self.assertEqual(asks['hits'], 3)  # the revocation checks only: no entity kept
        name = 'Resharded ' + rand_tag()
        self.assertOk(self.update(c['owner'], eid, [c['owner'].address], name=name,
                                  port=self.b.port))
        self.eventually(lambda: self.name(self.a, eid), self.named(name),
                        'instance A reading the write made on the new owner')
        for _ in range(3):
            self.assertEqual(self.assertOk(self.name(self.a, eid))['data']['name'], name)
        self.wait_enabled(self.a)
        self.assertEqual(check_invariants(self.cl), [])

    def test_failover_leaves_no_stale_read(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        self.warm(eid, self.a, self.b)
        victim = self.cl.primary_of(ekey(eid))
        t0 = time.monotonic()
        victim.kill()

        def promoted():
            p = self.cl.primary_of(ekey(eid))
            return p is not victim and p.proc is not None
        harness.wait_for(promoted, scaled(30), interval=0.05, what='a replica promoted')
        name = 'After failover ' + rand_tag()
        self.eventually(lambda: self.update(c['owner'], eid, [c['owner'].address], name=name,
                                            port=self.b.port),
                        lambda r: r[0] == 200, 'the write on the promoted replica', timeout=10)
        self.eventually(lambda: self.name(self.a, eid), self.named(name),
                        'instance A reading the write made after the failover', timeout=5)
        for svc in (self.a, self.b):
            self.wait_enabled(svc)
        print('cache on again %.1fs after SIGKILL' % (time.monotonic() - t0))
        for _ in range(3):
            self.assertEqual(self.assertOk(self.name(self.a, eid))['data']['name'], name)
        self.assertEqual(check_invariants(self.cl), [])


if __name__ == '__main__':
    harness.main()
