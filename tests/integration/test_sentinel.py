"""Sentinel mode against 1 primary, 1 replica and 3 sentinels (rcluster.SentinelSet): the service
asks the sentinels for the primary, checks its role, and follows SENTINEL FAILOVER under load
without a restart: only 503/504 during the switch, full service soon after, no acknowledged
write lost, and the read cache back on, now on the new primary."""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import rcluster  # noqa: E402
from harness import scaled  # noqa: E402
from invariants import check_invariants  # noqa: E402
from test_cluster import ClusterCase, RECOVERY_S  # noqa: E402
from test_entities import ekey  # noqa: E402


class SentinelTest(ClusterCase):

    def test_failover_under_load(self):
        ss = rcluster.SentinelSet()
        self.addCleanup(ss.kill)
        svc = self.start(ss)
        owner = self.c['owner']
        first = ss.primary()
        ents = [self.create(owner) for _ in range(6)]
        self.assertEqual(rcluster._decode(first.cli('HGET', ekey(ents[0]['id']), '__v')), '0')
        harness.wait_for(lambda: harness.metric(self.port, 'entityd_read_cache_enabled', 0.0) == 1,
                         scaled(10), what='the read cache on')
        lock = threading.Lock()
        log = []
        stop = threading.Event()

        def load(k):
            n = 0
            while not stop.is_set():
                n += 1
                if n % 2:
                    e = ents[n % len(ents)]
                    resp = self.get_entity(e['id'], owner)
                    name = None
                else:
                    # Each thread writes its own entities: the log's order is the write order.
                    e = ents[(n // 2 * 3 + k) % len(ents)]
                    name = 's-%d-%d' % (k, n)
                    resp = self.update(owner, e['id'], [owner.address], name=name)
                with lock:
                    log.append((time.monotonic(), e['id'], resp[0], name))

        threads = [threading.Thread(target=load, args=(k,), daemon=True) for k in range(3)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        self.assertEqual(ss.failover(), 'OK')
        harness.wait_for(lambda: ss.primary() is not first, scaled(30), interval=0.05,
                         what='the replica promoted')
        t_switch = time.monotonic()
        time.sleep(scaled(RECOVERY_S) + 2.0)
        stop.set()
        for t in threads:
            t.join(scaled(30))

        statuses = {s for _, _, s, _ in log}
        self.assertTrue(statuses <= {200, 503, 504}, statuses)
        late = [(t - t_switch, s) for t, _, s, _ in log
                if t > t_switch + scaled(RECOVERY_S) and s != 200]
        self.assertEqual(late, [])
        self.assertTrue(any(t > t_switch and s == 200 for t, _, s, _ in log))
        self.assertIn('redis primary switched', [r.get('msg') for r in svc.logs()])
        self.assertEqual(harness.metric(self.port, 'entityd_redis_primary_switches_total', 0.0), 1)
        bad = [t for t, _, s, _ in log if s != 200]
        print('sentinel failover: %d requests, %d not 200 (%.2fs from the first to the last)' %
              (len(log), len(bad), (max(bad) - min(bad)) if bad else 0.0))
        # Writes land on the new primary, and none acknowledged is lost.
        for e in ents:
            mine = [(s, name) for _, eid, s, name in log if eid == e['id'] and name]
            acked = [i for i, (s, _) in enumerate(mine) if s == 200]
            if not acked:
                continue
            allowed = {mine[acked[-1]][1]} | {name for s, name in mine[acked[-1]:] if s != 200}
            self.assertIn(self.entity_name(e['id']), allowed, e['id'])
        self.assertEqual(check_invariants(ss), [])
        # The read cache followed the primary: on again, its invalidations from the new one.
        harness.wait_for(lambda: harness.metric(self.port, 'entityd_read_cache_enabled', 0.0) == 1,
                         scaled(10), what='the read cache on again')
        e = ents[0]
        self.entity_name(e['id'])
        up = self.assertOk(self.update(owner, e['id'], [owner.address], name='After'))['data']
        self.assertEqual(self.entity_name(e['id']), up['name'])
        ss.primary().cli('HSET', ekey(e['id']), 'json',
                         rcluster._decode(ss.primary().cli('HGET', ekey(e['id']), 'json'))
                         .replace('"After"', '"Direct"'))
        harness.wait_for(lambda: self.entity_name(e['id']) == 'Direct', scaled(5),
                         what='a change on the new primary seen through the cache')

    def test_bad_settings_are_refused_at_start(self):
        base = harness.Entityd(start=False).env()
        for env in ({'REDIS_SENTINELS': '127.0.0.1:1'},
                    {'REDIS_SENTINELS': '127.0.0.1', 'REDIS_SENTINEL_MASTER': 'm'},
                    {'REDIS_SENTINELS': '127.0.0.1:1', 'REDIS_SENTINEL_MASTER': 'a b'}):
            with self.subTest(env=env):
                p = subprocess.run([harness.ENTITYD_BIN], env=dict(base, **env),
                                   capture_output=True, timeout=scaled(10))
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(b'REDIS_SENTINEL', p.stderr)

    def test_unreachable_sentinels_not_ready(self):
        # Sentinels that do not answer: not ready, and the service keeps asking.
        port = harness.free_port()
        svc = self.entityd(env={'REDIS_SENTINELS': '127.0.0.1:%d' % port,
                                'REDIS_SENTINEL_MASTER': 'mymaster'}, wait_ready=False)
        # Waited for, not assumed after a fixed pause: the first attempt's time is the
        # service's, on a machine that may be loaded.
        harness.wait_for(lambda: 'redis primary unknown: no sentinel named it' in
                         [r.get('msg') for r in svc.logs()], scaled(10),
                         what='the log line of a failed attempt')
        self.assertEnvelope(svc.request('GET', '/readyz'), 503, 'unavailable')


if __name__ == '__main__':
    harness.main()
