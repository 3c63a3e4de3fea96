"""Deleting an entity (CONTRACT section 8, last bullet): the answer, every route 404 at once, the
alias free at once, __v compare-and-set, the role matrix, writes racing the delete leaving no
key behind, the background erasure killed half-way (SIGKILL) and finished by a restarted
instance, a delete whose outcome is unknown (a held reply) retried to the same end state, the
alias free also when the delete's own release was lost (and the record kept until a release
succeeds), the short pause of the steps that find nothing to unlink, several erasures sharing
one scan on a single Redis, and on Redis Cluster a step reading its slot's list of keys (and
scanning past 2,048 keys of others there).
Every end state is checked with SCAN over the entity's hash tag and the invariants."""

import os
import re
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
from invariants import check_invariants  # noqa: E402

WALLETS = 120
SMALL_STEPS = {'ERASE_STEP_KEYS': '20', 'ERASE_PAUSE_MS': '20', 'ERASE_POLL_MS': '100',
               'ERASE_LEASE_MS': '1500'}


class EraseTest(harness.ServiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.platform = cls.pool.pop()
        cls.r = cls.class_redis()
        # The class's instance erases only what it deletes itself (a kick, then one look at the
        # set), so that the restarted instance of the SIGKILL test is the one that finishes.
        cls.svc = cls.class_entityd(redis=cls.r, env=cls.env_for(ERASE_POLL_MS='3600000'))
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])

    @classmethod
    def env_for(cls, **more):
        env = {'PLATFORM_ADMINS': cls.platform.address, 'ERASE_POLL_MS': '100',
               'RATE_WRITES_PER_MINUTE': '0'}
        env.update(more)
        return env

    # ---- helpers ----

    def wallets(self, n):
        return [self.pool.pop() for _ in range(n)]

    def auth(self, w):
        return self.signer.query(w)

    def req(self, method, path, body=None, port=None):
        return harness.request(port or self.port, method, path, body=body, timeout=scaled(10))

    def setup_entity(self, members=2, alias=None, public=True):
        owner, admin, stranger = self.wallets(3)
        ms = self.wallets(members)
        body = {'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
                'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
                'imageUrl': '', 'public': public}
        if alias:
            body['communityURLAlias'] = alias
        eid = self.assertOk(self.req('POST', '/api/entities?' + self.auth(owner), body),
                            201)['data']['id']
        self.assertOk(self.req('POST', '/api/entities/%s/admins?%s' % (eid, self.auth(owner)),
                               {'addresses': [admin.address]}))
        self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(owner)),
                               {'addresses': [m.address for m in ms], 'Chain': 'eth'}))
        out = self.assertOk(self.req('POST', '/api/skills/multiple?' + self.auth(owner), {
            'entityID': eid, 'names': ['Skill A', 'Skill B']}), 201)
        sids = [s['id'] for s in out['data']]
        self.assertOk(self.req('POST', '/api/entities/%s/levels/L1/update?%s' % (
            eid, self.auth(owner)), {'name': 'One', 'description': '', 'skillIds': [sids[0]],
                                     'scores': [1], 'endsAt': '', 'XP': 1}), 201)
        for i, m in enumerate(ms):
            self.assertOk(self.award(owner, eid, {
                'member': m.address, 'title': 't%d' % i, 'idempotencyKey': 'k-%d-%s' % (
                    i, uuid.uuid4().hex[:6]), 'skills': [{'skillId': sids[0], 'score': 2}]}), 201)
        return eid, owner, admin, stranger, ms, sids

    def award(self, w, eid, body, port=None):
        return self.req('POST', '/api/entities/%s/contributions?%s' % (eid, self.auth(w)), body,
                        port=port)

    def delete(self, w, eid, extra='', port=None):
        return self.req('DELETE', '/api/entities/%s?%s%s' % (eid, self.auth(w), extra),
                        port=port)

    def keys_of(self, eid):
        """Every key under the entity's hash tag (SCAN, on every primary of a cluster)."""
        out, cursor = [], b'0'
        for _ in range(100000):
            cursor, batch = self.r.cli('SCAN', cursor, 'MATCH', 'ent:{%s}*' % eid, 'COUNT', 1000)
            out += [k.decode() for k in batch]
            if cursor in (b'0', '0', 0):
                return sorted(set(out))
        raise AssertionError('SCAN did not end')

    def erasing(self):
        # entries "<entity id>:<ms>:<token>" (keys.h)
        return [m.decode().split(':')[0] for m in self.r.cli('ZRANGE', 'erasures', 0, -1) or []]

    def wait_erased(self, eid, timeout=30):
        harness.wait_for(lambda: not self.keys_of(eid) and eid not in self.erasing(),
                         scaled(timeout), interval=0.1, what='erasure of %s' % eid)

    def node_cli(self, key, *args):
        node = self.r.primary_of(key) if hasattr(self.r, 'primary_of') else self.r
        return node.cli(*args)

    def routes(self, eid, w, m, sid):
        q = self.auth(w)
        a = m.address.lower()
        return [
            ('GET', '/api/entities/%s?%s' % (eid, q), None),
            ('GET', '/api/entities/%s?address=%s' % (eid, w.address), None),
            ('GET', '/api/entities/%s/users?%s' % (eid, q), None),
            ('GET', '/api/skills?entityID=%s&%s' % (eid, q), None),
            ('GET', '/api/entities/%s/admins?%s' % (eid, q), None),
            ('GET', '/api/entities/%s/members/%s/progress?%s' % (eid, a, q), None),
            ('GET', '/api/entities/%s/members/%s/contributions?%s' % (eid, a, q), None),
            ('GET', '/api/entities/%s/leaderboard?%s' % (eid, q), None),
            ('GET', '/api/entities/%s/leaderboard?by=%s&%s' % (eid, sid, q), None),
            ('GET', '/api/entities/%s/events?%s' % (eid, q), None),
            ('POST', '/api/entities/%s/force-add?%s' % (eid, q),
             {'addresses': ['0x' + os.urandom(20).hex()], 'Chain': 'eth'}),
            ('POST', '/api/entities/%s/contributions?%s' % (eid, q),
             {'member': a, 'title': 'late', 'xp': 1}),
            ('POST', '/api/entities/%s/levels/L1/update?%s' % (eid, q),
             {'name': 'One', 'description': '', 'skillIds': [], 'scores': [], 'endsAt': '',
              'XP': 2}),
            ('POST', '/api/skills?' + q, {'name': 'Late', 'description': '', 'entityID': eid}),
            ('POST', '/api/skills/multiple?' + q, {'entityID': eid, 'names': ['Late2']}),
            ('POST', '/api/entities/%s/admins?%s' % (eid, q),
             {'addresses': ['0x' + os.urandom(20).hex()]}),
            ('DELETE', '/api/entities/%s/admins/%s?%s' % (eid, a, q), None),
            ('POST', '/api/entities?' + q, {'id': eid, 'name': 'Back', 'description': '',
                                            'ownerAddresses': [w.address], 'twitter': '',
                                            'discord': '', 'website': '', 'imageUrl': ''}),
            ('DELETE', '/api/entities/%s?%s' % (eid, q), None),
        ]

    # ---- tests ----

    def test_delete_then_every_route_404_and_alias_free(self):
        alias = 'gone-%s' % uuid.uuid4().hex[:10]
        eid, owner, admin, _, ms, sids = self.setup_entity(members=3, alias=alias)
        before = self.keys_of(eid)
        self.assertIn('ent:{%s}:prog:%s' % (eid, ms[0].address.lower()), before)
        self.assertTrue(any(':idem:' in k for k in before), before)
        # The entity's cached reads are warm: the delete must reach them too.
        for w in (owner, ms[0]):
            self.assertOk(self.req('GET', '/api/entities/%s?%s' % (eid, self.auth(w))))
            self.assertOk(self.req('GET', '/api/entities/%s/users?%s' % (eid, self.auth(w))))
        t0 = time.monotonic()
        st, _, body = self.delete(owner, eid)
        took = time.monotonic() - t0
        self.assertEqual((st, body), (200, {'success': True, 'deleted': True}))
        self.assertLess(took, scaled(2.0))
        # The alias is free from the answer on: another entity takes it now.
        other = self.wallets(1)[0]
        self.assertOk(self.req('POST', '/api/entities?' + self.auth(other), {
            'name': 'Heir', 'description': '', 'ownerAddresses': [other.address],
            'twitter': '', 'discord': '', 'website': '', 'imageUrl': '',
            'communityURLAlias': alias}), 201)
        for w in (owner, admin, ms[0], self.platform):
            for method, path, body in self.routes(eid, w, ms[0], sids[0]):
                self.assertEnvelope(self.req(method, path, body), 404, 'not_found',
                                    message_contains=None)
        self.wait_erased(eid)
        self.assertEqual(self.keys_of(eid), [])
        # Nothing came back after the writes above were refused.
        for method, path, body in self.routes(eid, owner, ms[0], sids[0]):
            self.assertEqual(self.req(method, path, body)[0], 404, path)
        self.assertEqual(self.keys_of(eid), [])
        self.assertEqual(check_invariants(self.r), [])
        self.assertGreaterEqual(harness.metric(self.port, 'entityd_erasure_keys_total') or 0,
                                len(before) - 1)

    def test_other_instance_with_warm_caches_answers_404(self):
        """Another instance's read cache and users page cache held the entity's answers: the
        delete through this instance reaches them (Redis's invalidation of the renamed hash)."""
        other = self.entityd(redis=self.r, env=self.env_for(ERASE_POLL_MS='3600000'))
        eid, owner, admin, _, ms, sids = self.setup_entity(members=2)
        reads = [r for r in self.routes(eid, owner, ms[0], sids[0]) if r[0] == 'GET']
        for _ in range(3):  # cached on the second read
            for method, path, body in reads:
                self.assertEqual(self.req(method, path, body, port=other.port)[0], 200, path)
        hits = harness.metric(other.port, 'entityd_read_cache_total{outcome="hit"}')
        pages = harness.metric(other.port, 'entityd_users_page_cache_total{outcome="hit"}')
        self.assertGreater(hits or 0, 0)
        self.assertGreater(pages or 0, 0)
        self.assertEqual(self.delete(owner, eid)[0], 200)
        for method, path, body in reads:
            self.assertEnvelope(self.req(method, path, body, port=other.port), 404, 'not_found')
        self.wait_erased(eid)

    def test_v_compare_and_set(self):
        eid, owner, _, _, ms, _ = self.setup_entity(members=1)
        v = self.assertOk(self.req('GET', '/api/entities/%s?%s' % (
            eid, self.auth(owner))))['data']['__v']
        before = self.keys_of(eid)
        self.assertEnvelope(self.delete(owner, eid, '&v=%d' % (v + 1)), 409, 'conflict')
        self.assertEnvelope(self.delete(owner, eid, '&v=x1'), 400, 'invalid_request', 'v')
        self.assertEqual(self.keys_of(eid), before)
        self.assertOk(self.req('GET', '/api/entities/%s?%s' % (eid, self.auth(owner))))
        self.assertEqual(self.delete(owner, eid, '&v=%d' % v)[0], 200)
        self.wait_erased(eid)

    def test_role_matrix(self):
        eid, owner, admin, stranger, ms, _ = self.setup_entity(members=1)
        before = self.keys_of(eid)
        for w in (admin, ms[0], stranger):
            self.assertEnvelope(self.delete(w, eid), 403, 'forbidden')
        self.assertEnvelope(self.req('DELETE', '/api/entities/%s?address=%s' % (
            eid, owner.address)), 401, 'unauthenticated')
        self.assertEqual(self.keys_of(eid), before)
        self.assertEqual(self.delete(owner, eid)[0], 200)
        eid2, _, _, _, _, _ = self.setup_entity(members=1)
        self.assertEqual(self.delete(self.platform, eid2)[0], 200)
        self.assertEnvelope(self.delete(self.platform, eid2), 404, 'not_found')
        self.assertEnvelope(self.req('DELETE', '/api/entities/c-nope?' + self.auth(owner)), 404,
                            'not_found')
        self.wait_erased(eid)
        self.wait_erased(eid2)
        self.assertEqual(check_invariants(self.r), [])

    def test_writes_racing_the_delete_leave_nothing(self):
        eid, owner, admin, _, ms, sids = self.setup_entity(members=4)
        stop = threading.Event()
        codes = []
        lock = threading.Lock()

        def writer(i):
            w = (owner, admin)[i % 2]
            for n in range(200):
                if stop.is_set() and n > 0:
                    break
                if i % 2:
                    st = self.award(w, eid, {'member': ms[n % len(ms)].address, 'title': 'r',
                                             'idempotencyKey': 'race-%d-%d' % (i, n),
                                             'skills': [{'skillId': sids[n % 2], 'score': 1}]})[0]
                else:
                    st = self.req('POST', '/api/entities/%s/force-add?%s' % (
                        eid, self.auth(w)), {'addresses': ['0x' + os.urandom(20).hex()],
                                             'Chain': 'eth'})[0]
                with lock:
                    codes.append(st)
                if st == 404:
                    break
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        harness.wait_for(lambda: len(codes) >= 8, scaled(20), what='writes before the delete')
        self.assertEqual(self.delete(owner, eid)[0], 200)
        stop.set()
        for t in threads:
            t.join(scaled(60))
        self.assertTrue(all(c in (200, 201, 404) for c in codes), codes)
        self.assertIn(404, codes)
        self.wait_erased(eid)
        self.assertEqual(self.keys_of(eid), [])
        self.assertEqual(check_invariants(self.r), [])

    def seed(self, eid, n):
        """n progress keys of made-up members, written straight into Redis: an entity large
        enough that its erasure takes many small steps."""
        key = 'ent:{%s}' % eid
        self.node_cli(key, 'EVAL', "for i = 1, tonumber(ARGV[1]) do redis.call('HSET', "
                      "KEYS[1] .. ':prog:0x' .. string.format('%040d', i), 'xp', '1') end",
                      1, key, n)

    def test_erasure_killed_half_way_is_finished_by_a_restarted_instance(self):
        svc = self.entityd(redis=self.r, env=self.env_for(**SMALL_STEPS))
        eid, owner, _, _, ms, _ = self.setup_entity(members=2)
        self.seed(eid, 3000)
        rec = 'ent:{%s}:erasure' % eid
        self.assertEqual(self.delete(owner, eid, port=svc.port)[0], 200)

        def erased():
            v = self.node_cli(rec, 'HGET', rec, 'erased')
            return int(v) if v else 0
        harness.wait_for(lambda: erased() >= 100, scaled(30), interval=0.05,
                         what='the erasure under way')
        # The class's own instance must not take over meanwhile: its lease is long.
        svc.kill()
        left = self.keys_of(eid)
        self.assertIn(rec, left)
        self.assertGreater(len(left), 100)
        self.assertIn(eid, self.erasing())
        owner_before = self.node_cli(rec, 'HGET', rec, 'leaseOwner')
        self.assertTrue(owner_before)
        again = self.entityd(redis=self.r, env=self.env_for(**SMALL_STEPS))
        self.wait_erased(eid, timeout=120)
        self.assertEqual(self.keys_of(eid), [])
        self.assertEqual(harness.metric(again.port, 'entityd_erasures_finished_total'), 1)
        self.assertGreaterEqual(harness.metric(again.port, 'entityd_erasure_keys_total'), 1)
        self.assertEqual(check_invariants(self.r), [])

    def test_steps_that_find_nothing_keep_the_short_pause(self):
        """ERASE_PAUSE_MS follows only a step that unlinked keys: the steps through other
        entities' keys pause at most 2 ms, so a node full of them is crossed at that pace."""
        if hasattr(self.r, 'primary_of'):
            self.skipTest("the pace is the instance's, the same in every mode")
        pause_ms = 200
        svc = self.entityd(redis=self.r, env=self.env_for(
            ERASE_STEP_KEYS='10', ERASE_PAUSE_MS=str(pause_ms)))
        eid, owner, _, _, _, _ = self.setup_entity(members=2)
        entity_keys = len(self.keys_of(eid))
        # keys of nobody, for the scan to cross (taken away after)
        self.r.cli('EVAL', "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'filler:' .. i, "
                   "'x') end", 0, 8000)
        self.addCleanup(self.r.cli, 'EVAL', "for i = 1, tonumber(ARGV[1]) do redis.call("
                        "'UNLINK', 'filler:' .. i) end", 0, 8000)
        steps0 = harness.metric(svc.port, 'entityd_erasure_steps_total') or 0
        t0 = time.monotonic()
        self.assertEqual(self.delete(owner, eid, port=svc.port)[0], 200)
        self.wait_erased(eid, timeout=120)
        took = time.monotonic() - t0
        steps = harness.metric(svc.port, 'entityd_erasure_steps_total') - steps0
        # At most one step per key of the entity unlinked something; the others (hundreds, the
        # two passes over 8,000 keys) would take steps × the pause at the long one.
        self.assertGreater(steps, 10 * entity_keys)
        self.assertLess(took, steps * pause_ms / 1000 / 4,
                        '%d steps in %.1f s: the steps that found nothing paused %d ms' % (
                            steps, took, pause_ms))
        self.assertEqual(self.keys_of(eid), [])

    def test_erasures_on_a_single_redis_share_one_scan(self):
        """On a single Redis one SCAN of the node serves every pending erasure: four deleted
        together take about the steps of one (each one's own scans would take four times as
        many), and no key of a live entity or of nobody is touched."""
        if hasattr(self.r, 'primary_of'):
            self.skipTest('on a cluster each erasure reads its own slot')
        svc = self.entityd(redis=self.r, env=self.env_for(ERASE_STEP_KEYS='10',
                                                          ERASE_PAUSE_MS='2'))
        self.r.cli('EVAL', "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'filler:' .. i, "
                   "'x') end", 0, 3000)
        self.addCleanup(self.r.cli, 'EVAL', "for i = 1, tonumber(ARGV[1]) do redis.call("
                        "'UNLINK', 'filler:' .. i) end", 0, 3000)
        live = self.setup_entity(members=3)[0]
        live_keys = self.keys_of(live)

        def steps():
            return harness.metric(svc.port, 'entityd_erasure_steps_total') or 0

        def erase(n):
            made = [self.setup_entity(members=2) for _ in range(n)]
            s0 = steps()
            for eid, owner, _, _, _, _ in made:
                self.assertEqual(self.delete(owner, eid, port=svc.port)[0], 200)
            for eid, _, _, _, _, _ in made:
                self.wait_erased(eid, timeout=180)
            return steps() - s0
        one = erase(1)
        four = erase(4)
        sys.stderr.write('erasures: one in %d steps, four together in %d\n' % (one, four))
        self.assertLess(four, 2.5 * one, 'one erasure %d steps, four %d' % (one, four))
        self.assertEqual(self.keys_of(live), live_keys)
        self.assertEqual(int(self.r.cli('EVAL', "local c = 0 for i = 1, 3000 do c = c + "
                                        "redis.call('EXISTS', 'filler:' .. i) end return c",
                                        0)), 3000)
        self.r.cli('EVAL', "for i = 1, 3000 do redis.call('UNLINK', 'filler:' .. i) end", 0)
        self.assertEqual(check_invariants(self.r), [])

    def delete_proxies(self):
        """The RESP proxies the delete script passes through, and the environment of an
        entityd behind them: one in front of the one redis-server, or those of a cluster
        whose nodes announce their proxies (test_cluster_erase.py)."""
        if hasattr(self.r, 'proxies'):
            return self.r.proxies, {}
        if hasattr(self.r, 'primary_of'):
            self.skipTest('a cluster without proxies (test_cluster_erase.py has one with)')
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), 'adversary'))
        from harness import FaultProxy
        p = FaultProxy(self.r.port).start()
        self.addCleanup(p.stop)
        return [p], {'REDIS_URL': 'redis://127.0.0.1:%d/0' % p.port}

    def test_two_instances_one_erasure(self):
        """Two instances look for erasures at once: the lease in the record lets one run the
        steps; the erasure ends once, with nothing left."""
        a = self.entityd(redis=self.r, env=self.env_for(**SMALL_STEPS))
        b = self.entityd(redis=self.r, env=self.env_for(**SMALL_STEPS))
        eid, owner, _, _, ms, _ = self.setup_entity(members=2)
        self.seed(eid, 1500)

        def total(name):
            return sum(harness.metric(x.port, name) or 0 for x in (a, b, self.svc))
        finished, keys = total('entityd_erasures_finished_total'), \
            total('entityd_erasure_keys_total')
        self.assertEqual(self.delete(owner, eid, port=b.port)[0], 200)
        self.wait_erased(eid, timeout=120)
        self.assertEqual(total('entityd_erasures_finished_total') - finished, 1)
        self.assertGreaterEqual(total('entityd_erasure_keys_total') - keys, 1500)
        self.assertEqual(self.keys_of(eid), [])

    def fill(self, key, n):
        """n keys of nobody named key:1…key:n (in key's slot, on its primary); taken away after
        the test."""
        self.node_cli(key, 'EVAL', "for i = 1, tonumber(ARGV[1]) do redis.call('SET', "
                      "KEYS[1] .. ':' .. i, 'x') end", 1, key, n)
        self.addCleanup(self.unfill, key, n)

    def unfill(self, key, n):
        self.node_cli(key, 'EVAL', "for i = 1, tonumber(ARGV[1]) do redis.call('UNLINK', "
                      "KEYS[1] .. ':' .. i) end", 1, key, n)

    def count_filled(self, key, n):
        return self.node_cli(key, 'EVAL', "local c = 0 for i = 1, tonumber(ARGV[1]) do c = c + "
                             "redis.call('EXISTS', KEYS[1] .. ':' .. i) end return c", 1, key, n)

    def neighbour(self, eid, same_slot):
        """A key of nobody on the entity's primary: in the entity's slot, or in another one."""
        from rcluster import key_slot
        slot = key_slot('{%s}' % eid)
        node = self.r.primary_of('{%s}' % eid)
        for i in range(1000000):
            key = 'nobody:{n%d}' % i
            if (key_slot(key) == slot) == same_slot and self.r.primary_of(key) is node:
                return key
        raise AssertionError('no neighbour found')

    def test_cluster_steps_read_the_slot_not_the_node(self):
        """On Redis Cluster a step reads the list of the entity's slot's keys, not the node's
        keyspace: 20,000 keys of others on the node cost the erasure no step, 300 of them in
        the entity's slot a few, and those stay."""
        if not hasattr(self.r, 'primary_of'):
            self.skipTest("a single Redis keeps no list of a slot's keys: its steps scan")
        svc = self.entityd(redis=self.r, env=self.env_for(ERASE_STEP_KEYS='100'))
        eid, owner, _, _, _, _ = self.setup_entity(members=2)
        self.seed(eid, 1000)
        entity_keys = len(self.keys_of(eid))
        elsewhere, beside = self.neighbour(eid, False), self.neighbour(eid, True)
        self.fill(elsewhere, 20000)
        self.fill(beside, 300)
        steps0 = harness.metric(svc.port, 'entityd_erasure_steps_total') or 0
        self.assertEqual(self.delete(owner, eid, port=svc.port)[0], 200)
        self.wait_erased(eid, timeout=120)
        steps = harness.metric(svc.port, 'entityd_erasure_steps_total') - steps0
        # About one step a 100 keys of the entity, 3 to read past the 300 beside it and the
        # release's; two scans of the node would take over 200.
        self.assertLessEqual(steps, entity_keys // 100 + 3 + 10, steps)
        self.assertEqual(self.keys_of(eid), [])
        self.assertEqual(self.count_filled(elsewhere, 20000), 20000)
        self.assertEqual(self.count_filled(beside, 300), 300)
        self.unfill(elsewhere, 20000)
        self.unfill(beside, 300)
        self.assertEqual(check_invariants(self.r), [])

    def test_cluster_slot_crowded_by_others_is_scanned(self):
        """Past 2,048 keys of others in the entity's slot, the steps scan the node as on a
        single Redis, and the erasure still ends with none of its keys left and theirs kept."""
        if not hasattr(self.r, 'primary_of'):
            self.skipTest("a single Redis keeps no list of a slot's keys: its steps scan")
        # A step that unlinks keys pauses 300 ms, so the scanning steps last for the test to see.
        svc = self.entityd(redis=self.r, env=self.env_for(ERASE_STEP_KEYS='200',
                                                          ERASE_PAUSE_MS='300'))
        eid, owner, _, _, _, _ = self.setup_entity(members=2)
        self.seed(eid, 500)
        beside = self.neighbour(eid, True)
        self.fill(beside, 2500)
        rec = 'ent:{%s}:erasure' % eid
        self.assertEqual(self.delete(owner, eid, port=svc.port)[0], 200)
        seen = set()

        def scanning():
            seen.add(self.node_cli(rec, 'HGET', rec, 'listSkip'))
            return b'scan' in seen or not self.keys_of(eid)
        harness.wait_for(scanning, scaled(60), interval=0.02, what='the steps scanning')
        self.wait_erased(eid, timeout=120)
        self.assertIn(b'scan', seen)
        self.assertEqual(self.keys_of(eid), [])
        self.assertEqual(self.count_filled(beside, 2500), 2500)
        self.unfill(beside, 2500)
        self.assertEqual(check_invariants(self.r), [])

    def test_delete_with_unknown_outcome_retried(self):
        """The RESP proxy holds the delete script's reply past REDIS_TIMEOUT_MS: the answer is
        504, the delete happened; the retry answers 404; the end state is the one a plain delete
        leaves. Then the link is cut at the delete script: 503, retried to 200 or 404."""
        proxies, env = self.delete_proxies()
        env.update({'REDIS_TIMEOUT_MS': '300'})
        svc = self.entityd(redis=self.r, env=self.env_for(**env))
        # A try whose fault did not fire (a loaded machine, where a command before the delete
        # script outlasted the deadline, so the script was never sent) proves nothing about an
        # unknown outcome: its end state is still checked, and another try follows.
        for cut, attempt in [(c, t) for c in (False, True) for t in range(3)]:
            if attempt and fired:
                continue
            alias = 'unk-%s' % uuid.uuid4().hex[:10]
            eid, owner, _, _, ms, _ = self.setup_entity(members=2, alias=alias)
            self.auth(owner)
            # Only the delete script names the entity's erasure record (the check of the
            # caller's right before it, CONTRACT §12, names the caller too).
            match = re.escape(('ent:{%s}:erasure' % eid).encode())
            for p in proxies:
                if cut:
                    p.cut(match=match)
                else:
                    p.delay(1500, match=match)
            st, _, first = self.delete(owner, eid, port=svc.port)
            fired = any(p.triggered.is_set() for p in proxies)
            for p in proxies:
                p.release()
            self.assertIn(st, (503, 504), first)
            for _ in range(50):
                st, _, again = self.delete(owner, eid, port=svc.port)
                if st not in (503, 504):
                    break
                time.sleep(0.1)
            self.assertIn(st, (200, 404) if cut or not fired else (404,), again)
            self.assertEnvelope(self.req('GET', '/api/entities/%s?%s' % (
                eid, self.auth(owner))), 404, 'not_found')
            self.wait_erased(eid)
            # The alias is free (released by the retry, by the erasure's end, or never claimed
            # again by anyone else).
            other = self.wallets(1)[0]
            harness.wait_for(lambda: self.req('POST', '/api/entities?' + self.auth(other), {
                'name': 'Heir', 'description': '', 'ownerAddresses': [other.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '',
                'communityURLAlias': alias})[0] == 201, scaled(20), interval=0.2,
                what='the alias free')
            if attempt == 2:
                self.assertTrue(fired, 'no try of cut=%s met its fault' % cut)
        self.assertEqual(check_invariants(self.r), [])

    def test_alias_free_when_the_release_failed(self):
        """The link is cut at the delete's alias release, after the delete script ran: the
        answer is 200 and the claim is still there, young. Another entity claims the alias at
        once anyway (the holder's erasure record shows the claim can never be used again), and
        the erasure's end, releasing its own claim by token, leaves the new claim alone."""
        proxies, env = self.delete_proxies()
        # Slow erasure steps: the record outlives the claim below by seconds.
        env.update({'ERASE_STEP_KEYS': '10', 'ERASE_PAUSE_MS': '1500'})
        svc = self.entityd(redis=self.r, env=self.env_for(**env))
        alias = 'rel-%s' % uuid.uuid4().hex[:10]
        eid, owner, _, _, _, _ = self.setup_entity(members=2, alias=alias)
        for p in proxies:
            p.cut(match=re.escape(('alias:{%s}' % alias).encode()))
        st, _, b = self.delete(owner, eid, port=svc.port)
        for p in proxies:
            p.release()
        self.assertEqual((st, b), (200, {'success': True, 'deleted': True}))
        self.assertTrue(any(p.stats()['cuts'] for p in proxies), 'the release was not cut')
        held = self.r.cli('GET', 'alias:{%s}' % alias)
        self.assertTrue(held and held.decode().startswith(eid + ' '), held)
        self.assertIn(eid, self.erasing())
        heir = self.wallets(1)[0]
        body = {'name': 'Heir', 'description': '', 'ownerAddresses': [heir.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '',
                'communityURLAlias': alias}
        # The cut link made again (a read of the deleted entity answers 404, not 503).
        harness.wait_for(lambda: self.req('GET', '/api/entities/%s?address=%s' % (
            eid, heir.address), port=svc.port)[0] == 404, scaled(5), interval=0.05,
            what='the store reached again')
        new = self.assertOk(self.req('POST', '/api/entities?' + self.auth(heir), body,
                                     port=svc.port), 201)['data']['id']
        self.wait_erased(eid)
        got = self.assertOk(self.req('GET', '/api/entities/by-alias/%s?address=%s' % (
            alias, heir.address), port=svc.port))
        self.assertEqual(got['data']['id'], new)
        self.assertEqual(check_invariants(self.r), [])

    def test_record_outlives_a_lost_release(self):
        """Both releases lost: the delete's own and the erasure's (the link cut as each is
        sent, then refused until the checks end). The record stays, the entity's only key, until the
        claim is released: so a claimant can still take the alias over meanwhile. Once the link
        is back the erasure releases the claim and ends; the alias is free."""
        proxies, env = self.delete_proxies()
        env.update({'ERASE_STEP_KEYS': '10', 'ERASE_PAUSE_MS': '200', 'REDIS_TIMEOUT_MS': '500'})
        svc = self.entityd(redis=self.r, env=self.env_for(**env))
        alias = 'rec-%s' % uuid.uuid4().hex[:10]
        eid, owner, _, _, _, _ = self.setup_entity(members=2, alias=alias)
        match = re.escape(('alias:{%s}' % alias).encode())
        for p in proxies:
            p.cut(match=match)
        st, _, b = self.delete(owner, eid, port=svc.port)
        self.assertEqual((st, b), (200, {'success': True, 'deleted': True}))
        for p in proxies:
            p.release()
            # Refused until released below, however long the checks take.
            p.cut(match=match, refuse_s=scaled(60))
        try:
            # Any proxy: in a cluster only the one of the alias's node sees the release.
            harness.wait_for(lambda: any(p.triggered.is_set() for p in proxies), scaled(20),
                             interval=0.05, what='the erasure\'s release')
            rec = 'ent:{%s}:erasure' % eid
            self.assertEqual(self.keys_of(eid), [rec])
            self.assertEqual(self.node_cli(rec, 'HGET', rec, 'clean'), b'1')
            self.assertTrue(self.r.cli('GET', 'alias:{%s}' % alias).decode().startswith(eid))
        finally:
            for p in proxies:
                p.release()
        self.wait_erased(eid)
        harness.wait_for(lambda: self.r.cli('GET', 'alias:{%s}' % alias) is None, scaled(5),
                         what='the claim released')
        self.assertEqual(check_invariants(self.r), [])


if __name__ == '__main__':
    harness.main()
