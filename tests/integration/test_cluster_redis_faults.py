"""The Redis fault suite of test_redis_faults.py against a service in cluster mode, on a local
Redis Cluster whose every node sits behind a fault proxy (support/faultproxy.py).

Each node announces its proxy's port (cluster-announce-port; the bus keeps the node's own port
+ 10000), so CLUSTER SLOTS and every MOVED name proxies and every command entityd sends to a
node passes through that node's proxy. One cluster of three primaries serves every test of the
file (emptied between them): the faults here are about links and slow nodes, not failovers, so
no replicas, and a node timeout long enough that a 2 s DEBUG SLEEP is not taken for a failure.

- DEBUG SLEEP 2 and CLIENT PAUSE 5000 (64 connections, load shedding) on every primary at once:
  the single-Redis scenarios, the whole data set unreachable for a while;
- one primary SIGKILLed and restarted 1 s later (appendfsync always on it): the other primaries
  keep serving, nothing acknowledged is lost;
- replies delayed (under and past REDIS_TIMEOUT_MS), stalled from an EVALSHA (8 s: past the
  silent-link guard, so the node's connection is dropped and made again), links cut at the
  50th command and at an EVALSHA, on the proxy of the primary that holds the first entity of the
  data set. Aliases live in their own slots, usually on another primary: an update whose alias
  claim was answered by one node and whose entity script is lost or late on another is an
  unknown outcome the claim must survive; awards retried with the same idempotency key are
  applied once.

The assertions are test_redis_faults.py's (only 503/504 for requests needing Redis during a
fault, the pending gauge within REDIS_MAX_PENDING, full service within a bound after), and the
invariants of invariants.py read across every primary at the end of each test."""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'adversary'))
import harness  # noqa: E402
import rcluster  # noqa: E402
import test_redis_faults  # noqa: E402
import clients  # noqa: E402
from harness import FaultProxy, scaled  # noqa: E402
from workload import World  # noqa: E402

setUpModule = test_redis_faults.setUpModule

# Longer than any stall here (DEBUG SLEEP blocks the bus too): no node is flagged failing.
NODE_TIMEOUT_MS = 15000


class ProxiedCluster(rcluster.RedisCluster):
    """Three primaries, appendonly, each behind its own proxy (proxy(node) makes one with a
    .port; FaultProxy by default) and announcing it. The test's own commands (cli, invariants)
    go to the nodes directly."""

    def __init__(self, proxy=lambda node: FaultProxy(node).start()):
        self.proxies = []
        for attempt in range(3):
            super().__init__(primaries=3, replicas=0, start=False,
                             node_timeout=NODE_TIMEOUT_MS, appendonly=True)
            self.proxies = [proxy(n) for n in self.nodes]
            for n, p in zip(self.nodes, self.proxies):
                n.extra_args += ['--cluster-announce-port', str(p.port),
                                 '--cluster-announce-bus-port', str(n.port + 10000)]
            try:
                self.start()
                break
            except (TimeoutError, RuntimeError):
                # A port checked free was taken meanwhile by a test running alongside.
                self.close()
                if attempt == 2:
                    raise
        self.wait_announced()

    @property
    def cluster_nodes(self):
        return ','.join('127.0.0.1:%d' % p.port for p in self.proxies)

    def wait_announced(self):
        """Every node's CLUSTER SLOTS names the proxies only."""
        ports = {p.port for p in self.proxies}

        def announced():
            for n in self.live():
                if {r[2][1] for r in n.cli('CLUSTER', 'SLOTS')} != ports:
                    return False
            return True
        harness.wait_for(announced, scaled(20), interval=0.1, what='proxy ports announced')

    def node_of_port(self, port):
        for n, p in zip(self.nodes, self.proxies):
            if port in (n.port, p.port):
                return n
        raise KeyError(port)

    def wait_slot(self, slot, node, timeout=None):
        """Every live node's CLUSTER SLOTS says node (by its proxy's port) serves slot."""
        want = self.proxy_of(node).port

        def agreed():
            for n in self.live():
                if not any(r[0] <= slot <= r[1] and r[2][1] == want
                           for r in n.cli('CLUSTER', 'SLOTS')):
                    return False
            return True
        harness.wait_for(agreed, timeout or scaled(20), interval=0.05, what='slot %d agreed' % slot)

    def proxy_of(self, node):
        return self.proxies[self.nodes.index(node)]

    def cli(self, *args, timeout=5.0):
        if str(args[0]).upper() == 'CLIENT':  # CLIENT PAUSE: every primary, like DEBUG
            out = None
            for n in self.primaries():
                out = n.cli(*args, timeout=timeout)
            return out
        return super().cli(*args, timeout=timeout)

    def reset(self):
        """Between tests: every fault released, every node up, the data set empty."""
        for p in self.proxies:
            if hasattr(p, 'release'):
                p.release()
                with p.lock:  # figures per test: a test asserts on its own cuts
                    p.commands = p.connections = p.cuts = 0
                    p.faults = {}
        for n in self.nodes:
            if n.proc is None:
                n.start()
            n.cli('CONFIG', 'SET', 'appendfsync', 'everysec')
            n.cli('FLUSHALL')
        self.wait_ok()

    def close(self):
        self.kill()
        for p in self.proxies:
            (p.stop if hasattr(p, 'stop') else p.close)()
        self.proxies = []


class OnProxiedCluster:
    """One ProxiedCluster for the test class (cls.cluster), closed after it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster = ProxiedCluster()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        super().tearDownClass()


class ClusterRedisFaultsTest(OnProxiedCluster, test_redis_faults.RedisFaultsTest):

    # Five seconds of pause piled up about 340 commands here (every primary paused, each
    # client held up to REDIS_TIMEOUT_MS by each request), fewer than with one Redis: the cap
    # stays above what 64 clients keep in flight when the nodes answer, and below the pile-up.
    pause_max_pending = 256

    def setup(self, env=None, appendonly=False, proxy=False):
        """As in single mode, on the shared cluster; the proxy given back is the one in front
        of the primary that holds the data set's first entity."""
        r = self.cluster
        r.reset()
        e = {'REDIS_TIMEOUT_MS': 1000, 'EVENTS_MAX': 10000000}  # as in single mode
        if harness.SANITIZED:
            e['ASAN_OPTIONS'] = (os.environ.get('ASAN_OPTIONS', '') +
                                 ':quarantine_size_mb=16').lstrip(':')
        e.update(env or {})
        svc = self.entityd(redis=r, env=e)
        world = World(svc.port)
        node = r.primary_of('ent:{%s}' % world.eids[0])
        others = [r.primary_of('ent:{%s}' % x) for x in world.eids[1:]]
        test_redis_faults.log('\nfaulted node %d holds %d of %d entities' % (
            node.port, 1 + others.count(node), len(world.eids)))
        return r, svc, world, (r.proxy_of(node) if proxy else None)

    # Held past cluster.c's silent-link guard (no reply for 5 s with commands outstanding: the
    # node's connection is freed, its units answered 503, and it reconnects), which the 2.5 s
    # of the single-Redis scenario do not reach: 3 s of margin for a slow loop.
    stall_seconds = 8.0

    def check_stalled_links(self, p, links_before):
        self.assertGreater(p.stats()['connections'], links_before, 'the stalled link was kept')

    def test_redis_killed_and_restarted(self):
        # One primary (the first entity's) killed and restarted; the other two keep serving.
        r, svc, world, _ = self.setup(env={'REDIS_TIMEOUT_MS': 1000})
        node = r.primary_of('ent:{%s}' % world.eids[0])
        node.cli('CONFIG', 'SET', 'appendfsync', 'always')

        up = 'entityd_redis_node_up{node="127.0.0.1:%d"}' % r.proxy_of(node).port

        def fault():
            time.sleep(0.2)
            node.kill()
            time.sleep(1.0)
            node.start()
            r.wait_ok()
            # The fault is over once the service is connected again: its reconnects back off
            # to one every 2 s, and a cluster node takes a while to start (its data and then
            # the cluster's agreement), so a retry may fall just before the node is back.
            harness.wait_for(lambda: harness.sample(clients.fetch_metrics(svc.port), up) == 1,
                             scaled(5), interval=0.05, what='the restarted node connected')
        self.run_fault(r, svc, world, fault, what='one primary SIGKILLed, restarted 1 s later')

    def test_slot_moved_under_load(self):
        # The slot of an entity with its many keys (one per idempotency key) moved to another
        # primary and back three times, MIGRATE in batches as redis-cli reshard does, under
        # the load.
        r, svc, world, _ = self.setup(env={'REDIS_TIMEOUT_MS': 1000})
        slot = rcluster.key_slot('ent:{%s}' % world.eids[0])
        src = r.primary_of('ent:{%s}' % world.eids[0])
        dst = next(n for n in r.primaries() if n is not src)

        def window(a, b):
            time.sleep(0.3)  # the slot migrating, no key moved yet: writes meet the states

        def fault():
            time.sleep(1.0)  # a few hundred keys in the slot by now
            for _ in range(3):
                r.migrate_slot(slot, dst, keys_first=window)
                r.migrate_slot(slot, src, keys_first=window)
        self.run_fault(r, svc, world, fault, expect_errors=False,
                       what='a slot moved to another primary and back, three times')
        # Redis 7.0 stops a script midway at a key of a moving slot missing on its node; the
        # entity scripts refuse to start while their slot moves (moving_guard), so none was.
        stopped = sum(float(line.split()[-1])
                      for line in clients.fetch_metrics(svc.port).split('\n')
                      if line.startswith('entityd_redis_node_scripts_stopped_total{'))
        self.assertEqual(stopped, 0, 'scripts stopped midway by a moving slot')


if __name__ == '__main__':
    harness.main()
