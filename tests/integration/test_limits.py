"""Per-address limits, trace context and browser callers (CONTRACT section 7): the write budget
and the creation quota shared by every instance through Redis, 429 with Retry-After and nothing
written, platform admins exempt, admission under parallel load; traceparent echoed and logged;
CORS preflights and origins."""

import json
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import metrics_text, sample, scaled  # noqa: E402

DEFAULTS = {'RATE_WRITES_PER_MINUTE': '120', 'ENTITY_CREATE_PER_DAY': '20'}


def entity_body(owner, **extra):
    body = {'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
            'ownerAddresses': [owner], 'twitter': '', 'discord': '', 'website': '',
            'imageUrl': ''}
    body.update(extra)
    return body


class LimitsBase(harness.ServiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(24)

    def setUp(self):
        super().setUp()
        self._creds = {}

    def auth(self, svc, w):
        c = self._creds.get(w.address)
        if c is None:
            msg, _ = harness.current_message(svc.port)
            c = self._creds[w.address] = w.sign(msg)
        return harness.auth_query(*c)

    def req(self, svc, method, path, body=None, headers=None):
        return harness.request(svc.port, method, path, body=body, headers=headers,
                               timeout=scaled(10))

    def create(self, svc, w):
        return self.req(svc, 'POST', '/api/entities?' + self.auth(svc, w),
                        entity_body(w.address))

    def add_skill(self, svc, w, eid, client=None):
        body = {'name': 'skill %s' % uuid.uuid4().hex, 'description': '', 'entityID': eid}
        path = '/api/skills?' + self.auth(svc, w)
        if client:
            return client.request('POST', path, body)
        return self.req(svc, 'POST', path, body)

    def skills_until_limited(self, svc, w, eid, most):
        """Adds skills on one keep-alive connection until one is refused (at most `most`).
        Returns (how many were admitted, the first refusal or None)."""
        c = harness.Client(svc.port, timeout=scaled(10))
        try:
            for n in range(most):
                resp = self.add_skill(svc, w, eid, client=c)
                if resp[0] != 201:
                    return n, resp
            return most, None
        finally:
            c.close()

    def skill_count(self, r, eid):
        return int(r.cli('HLEN', 'ent:{%s}:skills' % eid))

    def entity_count(self, r):
        keys = [k.decode() if isinstance(k, bytes) else k for k in r.cli('KEYS', 'ent:{c-*}')]
        return len([k for k in keys if k.endswith('}')])

    def parallel_skill_adds(self, s1, s2, wallet, eid, n=64):
        """n skill additions by one wallet at once, alternating between two instances. Each
        answer is 201 or a 429 in the contract's shape. Returns (201s, 429s, seconds from the
        release of the writers to the last answer)."""
        results = []
        lock = threading.Lock()
        go = threading.Event()

        def worker(i):
            go.wait(scaled(10))
            resp = self.add_skill(s1 if i % 2 else s2, wallet, eid)
            with lock:
                results.append(resp)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        started = time.monotonic()
        go.set()
        for t in threads:
            t.join(scaled(60))
        elapsed = time.monotonic() - started
        self.assertEqual(len(results), n)
        ok = [x for x in results if x[0] == 201]
        limited = [x for x in results if x[0] == 429]
        self.assertEqual(len(ok) + len(limited), n, [x for x in results if x[0] not in (201, 429)])
        for x in limited:
            self.assertLimited(x)
        return ok, limited, elapsed

    def assertLimited(self, resp):
        status, headers, body = resp
        self.assertEnvelope(resp, 429, 'rate_limited')
        self.assertIn('retry-after', headers)
        self.assertRegex(headers['retry-after'], r'^[1-9][0-9]*$')
        return int(headers['retry-after'])


class WriteBudgetTest(LimitsBase):
    def test_121st_write_in_a_minute_is_429_and_changes_nothing(self):
        r = self.redis()
        svc = self.entityd(redis=r, env=DEFAULTS)
        a, b = self.pool.pop(), self.pool.pop()
        started = time.monotonic()
        eid = self.assertOk(self.create(svc, a), 201)['data']['id']  # write 1
        added, limited = self.skills_until_limited(svc, a, eid, 200)
        t_refused = time.monotonic()
        admitted = 1 + added
        elapsed = t_refused - started
        retry = self.assertLimited(limited)
        self.assertLessEqual(retry, 60)
        # 120 at once, and a token bucket refills one every 0.5 s while they are sent: the
        # 121st write is refused unless the run took long enough for one to come back.
        self.assertGreaterEqual(admitted, 120)
        self.assertLessEqual(admitted, 120 + int(elapsed / 0.5), elapsed)
        # The refused one changed nothing: every skill and event is an admitted write's.
        before = self.skill_count(r, eid)
        self.assertEqual(before, admitted - 1)
        self.assertEqual(int(r.cli('XLEN', 'ent:{%s}:events' % eid)), admitted - 1)
        # A force-add is a write too, refused the same way. The bucket gives one write back
        # every 0.5 s, at any moment after the refusal above: one may come back before this
        # request (the likelier the longer the checks above took), so up to one force-add per
        # 0.5 s since is admitted before the refusal.
        fa_path = '/api/entities/%s/force-add?%s' % (eid, self.auth(svc, a))
        refused, fa_admitted = None, 0
        for _ in range(5):
            resp = self.req(svc, 'POST', fa_path, {'addresses': [b.address], 'Chain': 'eth'})
            if resp[0] == 429:
                refused = resp
                break
            self.assertIn(resp[0], (200, 201), resp)
            fa_admitted += 1
        self.assertIsNotNone(refused, 'force-add never limited')
        self.assertLimited(refused)
        self.assertLessEqual(fa_admitted, 1 + int((time.monotonic() - t_refused) / 0.5))
        # Reads are not limited.
        status, _, _ = self.req(svc, 'GET', '/api/skills?entityID=%s&%s' % (eid, self.auth(svc, a)))
        self.assertEqual(status, 200)
        # Another address is unaffected.
        self.assertOk(self.create(svc, b), 201)
        # The budget refills: after Retry-After, one write goes through.
        time.sleep(retry + 0.05)
        self.assertOk(self.add_skill(svc, a, eid), 201)
        self.assertEqual(self.skill_count(r, eid), before + 1)
        # The limited requests are counted by route.
        _, _, metrics = self.req(svc, 'GET', '/metrics')
        text = metrics.decode() if isinstance(metrics, bytes) else metrics
        self.assertIn('entityd_rate_limited_total{route="/api/skills",limit="writes"} 1', text)
        self.assertIn(
            'entityd_rate_limited_total{route="/api/entities/{id}/force-add",limit="writes"} 1',
            text)

    def test_two_instances_share_the_budget(self):
        r = self.redis()
        # 6 a minute: one comes back every 10 s, far longer than this test's writes take.
        env = {'RATE_WRITES_PER_MINUTE': '6', 'ENTITY_CREATE_PER_DAY': '20'}
        s1 = self.entityd(redis=r, env=env)
        s2 = self.entityd(redis=r, env=env)
        a, b = self.pool.pop(), self.pool.pop()
        eid = self.assertOk(self.create(s1, a), 201)['data']['id']
        for i in range(5):
            self.assertOk(self.add_skill(s1 if i % 2 else s2, a, eid), 201)
        self.assertLimited(self.add_skill(s1, a, eid))
        self.assertLimited(self.add_skill(s2, a, eid))
        self.assertEqual(self.skill_count(r, eid), 5)
        self.assertOk(self.create(s2, b), 201)

    def test_platform_admin_is_never_limited(self):
        r = self.redis()
        admin = self.pool.pop()
        svc = self.entityd(redis=r, env={'RATE_WRITES_PER_MINUTE': '3',
                                         'ENTITY_CREATE_PER_DAY': '2',
                                         'PLATFORM_ADMINS': admin.address})
        ids = [self.assertOk(self.create(svc, admin), 201)['data']['id'] for _ in range(6)]
        for _ in range(10):
            self.assertOk(self.add_skill(svc, admin, ids[0]), 201)
        # Signed without the address (level update: the recovered address is the caller).
        msg, _ = harness.current_message(svc.port)
        other = self.pool.pop()
        _, sig = admin.sign(msg)
        for i in range(5):
            status, _, body = self.req(
                svc, 'POST', '/api/entities/%s/levels/lv%d/update?signature=%s' % (ids[1], i, sig),
                {'name': 'L', 'skillIds': [], 'scores': [], 'XP': i})
            self.assertEqual(status, 201, body)
        self.assertEqual(r.cli('EXISTS', 'limit:{%s}' % admin.address), 0)
        # A caller who is not one is limited on the same instance.
        for _ in range(2):
            self.assertOk(self.create(svc, other), 201)
        self.assertLimited(self.create(svc, other))

    def test_level_update_without_address_spends_the_recovered_callers_budget(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'RATE_WRITES_PER_MINUTE': '3'})
        a = self.pool.pop()
        eid = self.assertOk(self.create(svc, a), 201)['data']['id']
        msg, _ = harness.current_message(svc.port)
        _, sig = a.sign(msg)
        for i in range(3):
            status, headers, body = self.req(
                svc, 'POST', '/api/entities/%s/levels/lv%d/update?signature=%s' % (eid, i, sig),
                {'name': 'L', 'skillIds': [], 'scores': [], 'XP': i})
            if i < 2:
                self.assertEqual(status, 201, body)
        self.assertLimited((status, headers, body))
        self.assertEqual(int(r.cli('HLEN', 'ent:{%s}:levels' % eid)), 2)

    def test_revoked_signature_spends_no_budget(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'RATE_WRITES_PER_MINUTE': '4'})
        a = self.pool.pop()
        eid = self.assertOk(self.create(svc, a), 201)['data']['id']  # 1 of 4
        q = self.auth(svc, a)
        self.assertOk(self.req(svc, 'POST', '/api/auth/revoke?' + q), 200)  # not a budgeted write
        for _ in range(6):
            self.assertEnvelope(self.add_skill(svc, a, eid), 401, 'unauthenticated')
        # Three units are left: a key of its own would show them spent; signed in again
        # (the next epoch's message cannot be had here, so the budget itself is read). A
        # refused request's unit, charged while its signature was checked, goes back by a
        # command sent beside its 401, which may reach Redis just after the answer: at most
        # one unit (15 s) outstanding once those have landed.
        def outstanding_us():
            tat = int(r.cli('GET', 'limit:{%s}' % a.address).split(b':')[0])
            sec, usec = r.cli('TIME')
            return tat - (int(sec) * 1000000 + int(usec))

        harness.wait_for(lambda: outstanding_us() < 15_000_000 + 1_000_000, scaled(2),
                         what='the refused requests\' units given back')
        self.assertLess(outstanding_us(), 15_000_000 + 1_000_000)

    def test_limits_hold_under_64_parallel_requests(self):
        r = self.redis()
        env = {'RATE_WRITES_PER_MINUTE': '30'}
        s1 = self.entityd(redis=r, env=env)
        s2 = self.entityd(redis=r, env=env)
        a = self.pool.pop()
        # The refill runs from the create, which the server keys on: measured from before it.
        started = time.monotonic()
        eid = self.assertOk(self.create(s1, a), 201)['data']['id']  # 1 of 30
        self.auth(s1, a)
        ok, limited, _ = self.parallel_skill_adds(s1, s2, a, eid)
        elapsed = time.monotonic() - started
        # 29 units were left; one more refills every 2 s since the create.
        refilled = int(elapsed / 2.0)
        self.assertGreaterEqual(len(ok), 29)
        self.assertLessEqual(len(ok), 29 + refilled, elapsed)
        self.assertEqual(self.skill_count(r, eid), len(ok))


class LeaseTest(LimitsBase):
    """The write budget taken ahead in leases (RATE_LEASE_MS): a busy address's writes share one
    charge, no instance is ever granted more than the budget holds, and units a process has not
    spent go back to Redis when its lease is held out or the process stops."""

    def tat(self, r, w):
        """The write budget's theoretical arrival time (µs of Redis's clock) of an address."""
        v = r.cli('GET', 'limit:{%s}' % w.address)
        return int(v.split(b':')[0])

    def burst_then_hold(self, svc, w, eid, n):
        """n writes one after the other; returns the units the lease holds after them."""
        c = harness.Client(svc.port, timeout=scaled(10))
        try:
            for _ in range(n):
                self.assertOk(self.add_skill(svc, w, eid, client=c), 201)
        finally:
            c.close()
        return int(sample(metrics_text(svc), 'entityd_rate_lease_units'))

    def held_lease(self, r, hold_ms):
        """An instance holding part of a lease after a burst of 31 writes, with the address's
        budget read while it still holds them. None when the machine was too slow for the hold:
        the hold ran out before the read, or a lease took longer than a quarter of the hold to
        spend, so the next one did not double (lease_next_size) and none was left over."""
        a = self.entityd(redis=r, env={'RATE_WRITES_PER_MINUTE': '160',
                                       'RATE_LEASE_MS': str(hold_ms)})
        w = self.pool.pop()
        started = time.monotonic()
        eid = self.assertOk(self.create(a, w), 201)['data']['id']
        held = self.burst_then_hold(a, w, eid, 30)
        before = self.tat(r, w)
        text = metrics_text(a)
        if (sample(text, 'entityd_rate_lease_returned_units_total') > 0 or held == 0 or
                sample(text, 'entityd_rate_budget_charges_total') > 10):
            a.stop()
            return None
        # 31 writes, a handful of charges: each asked for twice as many units as the last.
        self.assertEqual(sample(text, 'entityd_rate_lease_writes_total') +
                         sample(text, 'entityd_rate_budget_charges_total'), 31)
        self.assertLessEqual(sample(text, 'entityd_rate_budget_charges_total'), 10, text)
        self.assertGreater(held, 0, text)
        self.assertLessEqual(held, 10)
        return a, w, eid, held, before, started

    def test_unspent_units_go_back_after_the_hold(self):
        r = self.redis()
        # 160 a minute: a unit is 375 ms, a lease at most 10. The hold runs from the lease's
        # last charge, which the test cannot see, and a lease doubles only when the last one
        # was spent within a quarter of it; when a loaded machine was slower than that, the
        # try says so and the next holds four times as long.
        for hold_ms in (3000, 12000, 48000):
            got = self.held_lease(r, hold_ms)
            if got:
                break
        self.assertIsNotNone(got, 'no try read the budget while the lease was held')
        a, w, eid, held, before, started = got
        harness.wait_for(lambda: sample(metrics_text(a), 'entityd_rate_lease_units') == 0,
                         scaled(10) + hold_ms / 1000, interval=0.1, what='the lease handed back')
        # Exactly the held units came back to the shared budget; nothing else was charged.
        self.assertEqual(before - self.tat(r, w), held * 375000)
        self.assertEqual(sample(metrics_text(a), 'entityd_rate_lease_returned_units_total'), held)
        # The other instance spends them: it gets all that is left, never more.
        b = self.entityd(redis=r, env={'RATE_WRITES_PER_MINUTE': '160', 'RATE_LEASE_MS': '250'})
        ok, limited = self.skills_until_limited(b, w, eid, 300)
        elapsed = time.monotonic() - started
        self.assertLimited(limited)
        self.assertGreaterEqual(ok, 160 - 31)
        self.assertLessEqual(31 + ok, 160 + int(elapsed / 0.375), elapsed)
        self.assertEqual(self.skill_count(r, eid), 30 + ok)

    def test_unspent_units_go_back_at_shutdown(self):
        r = self.redis()
        env = {'RATE_WRITES_PER_MINUTE': '160', 'RATE_LEASE_MS': '10000'}
        a = self.entityd(redis=r, env=env)
        w = self.pool.pop()
        eid = self.assertOk(self.create(a, w), 201)['data']['id']
        held = self.burst_then_hold(a, w, eid, 30)
        self.assertGreater(held, 0)
        before = self.tat(r, w)
        self.assertEqual(a.stop(), 0)
        self.assertEqual(before - self.tat(r, w), held * 375000)

    def test_shutdown_with_redis_gone_and_units_held(self):
        r = self.redis()
        a = self.entityd(redis=r, env={'RATE_WRITES_PER_MINUTE': '160', 'RATE_LEASE_MS': '10000'})
        w = self.pool.pop()
        eid = self.assertOk(self.create(a, w), 201)['data']['id']
        self.assertGreater(self.burst_then_hold(a, w, eid, 30), 0)
        r.kill()
        # The hand-backs fail at once; the process still stops cleanly.
        self.assertEqual(a.stop(), 0)

    def test_leases_never_over_admit_under_64_parallel_writes(self):
        r = self.redis()
        # 64 a minute (a lease of at most 4, a unit every 0.94 s), on two instances whose
        # leases are warm before the burst.
        env = {'RATE_WRITES_PER_MINUTE': '64', 'RATE_LEASE_MS': '2000'}
        s1 = self.entityd(redis=r, env=env)
        s2 = self.entityd(redis=r, env=env)
        w = self.pool.pop()
        started = time.monotonic()
        eid = self.assertOk(self.create(s1, w), 201)['data']['id']
        warm = 1
        for svc in (s1, s2):
            self.burst_then_hold(svc, w, eid, 8)
            warm += 8
        ok, limited, _ = self.parallel_skill_adds(s1, s2, w, eid)
        elapsed = time.monotonic() - started
        self.assertGreater(len(limited), 0)
        # Never more than the budget plus what refilled since the first write; at most one
        # lease's leftover per instance unspent (it goes back after the hold).
        self.assertLessEqual(warm + len(ok), 64 + int(elapsed / 0.9375), elapsed)
        self.assertGreaterEqual(warm + len(ok), 64 - 2 * 3)
        self.assertEqual(self.skill_count(r, eid), warm - 1 + len(ok))

    def test_the_lease_table_stays_bounded(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'RATE_WRITES_PER_MINUTE': '120', 'RATE_LEASE_MS': '10000',
                                         'RATE_LEASE_ADDRESSES': '4'})
        wallets = [self.pool.pop() for _ in range(12)]
        for w in wallets:
            self.assertOk(self.create(svc, w), 201)
        text = metrics_text(svc)
        # Four addresses hold a lease; the other eight were charged one write at a time, and
        # were limited all the same.
        self.assertEqual(sample(text, 'entityd_rate_leases'), 4)
        self.assertEqual(sample(text, 'entityd_rate_lease_full_total'), 8)
        for w in wallets[-2:]:
            # Until refused, not a fixed 120: the budget refills one write every 0.5 s, and on
            # a loaded machine the 120 writes may take seconds. The refusal is the point.
            limited = None
            for _ in range(400):
                resp = self.add_skill(svc, w, 'c-none')
                if resp[0] == 429:
                    limited = resp
                    break
            self.assertIsNotNone(limited, 'never limited')
            self.assertLimited(limited)
        self.assertLessEqual(sample(metrics_text(svc), 'entityd_rate_leases'), 4)


class CreationQuotaTest(LimitsBase):
    def test_21st_creation_in_a_day_is_429(self):
        r = self.redis()
        svc = self.entityd(redis=r, env=DEFAULTS)
        a, b = self.pool.pop(), self.pool.pop()
        ids = [self.assertOk(self.create(svc, a), 201)['data']['id'] for _ in range(20)]
        before = self.entity_count(r)
        self.assertEqual(before, 20)
        retry = self.assertLimited(self.create(svc, a))
        # A unit of the quota comes back every 72 minutes.
        self.assertGreater(retry, 60)
        self.assertLessEqual(retry, 72 * 60)
        self.assertEqual(self.entity_count(r), before)
        # Updating is not creating.
        body = entity_body(a.address, id=ids[0], name='Renamed')
        self.assertOk(self.req(svc, 'POST', '/api/entities?' + self.auth(svc, a), body), 200)
        # Another address has its own quota.
        self.assertOk(self.create(svc, b), 201)
        _, _, metrics = self.req(svc, 'GET', '/metrics')
        self.assertIn('entityd_rate_limited_total{route="/api/entities",limit="creations"} 1',
                      metrics.decode())

    def test_a_creation_refused_for_its_alias_is_not_counted(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'ENTITY_CREATE_PER_DAY': '2'})
        a, b = self.pool.pop(), self.pool.pop()
        self.assertOk(self.req(svc, 'POST', '/api/entities?' + self.auth(svc, b),
                               entity_body(b.address, communityURLAlias='taken-alias')), 201)
        for _ in range(3):
            self.assertEnvelope(
                self.req(svc, 'POST', '/api/entities?' + self.auth(svc, a),
                         entity_body(a.address, communityURLAlias='taken-alias')),
                409, 'conflict', 'communityURLAlias')
        self.assertOk(self.create(svc, a), 201)
        self.assertOk(self.create(svc, a), 201)
        self.assertLimited(self.create(svc, a))


class EntitySizeTest(LimitsBase):
    """MAX_*_PER_ENTITY and CONTRIBUTIONS_PER_MEMBER_PER_MINUTE: checked inside each write
    script, all or nothing, with a clear error."""

    def test_sizes(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'MAX_MEMBERS_PER_ENTITY': '3',
                                         'MAX_ADMINS_PER_ENTITY': '2',
                                         'MAX_SKILLS_PER_ENTITY': '3',
                                         'MAX_LEVELS_PER_ENTITY': '2'})
        owner = self.pool.pop()
        others = [w.address for w in harness.Wallet.random(4)]
        eid = self.assertOk(self.create(svc, owner), 201)['data']['id']
        q = self.auth(svc, owner)

        def force_add(addrs):
            return self.req(svc, 'POST', '/api/entities/%s/force-add?%s' % (eid, q),
                            {'addresses': addrs, 'Chain': 'eth'})
        self.assertOk(force_add(others[:2]), 200)
        self.assertEnvelope(force_add(others[1:4]), 409, 'conflict', 'addresses',
                            message_contains='at most 3 members')
        self.assertEqual(int(r.cli('HLEN', 'ent:{%s}:members' % eid)), 2)
        # Members already present do not count again; filling up to the most works.
        self.assertOk(force_add(others[:3]), 200)
        self.assertEnvelope(force_add(others[3:4]), 409, 'conflict', 'addresses')

        def admins(addrs):
            return self.req(svc, 'POST', '/api/entities/%s/admins?%s' % (eid, q),
                            {'addresses': addrs})
        self.assertEnvelope(admins(others[:3]), 409, 'conflict', 'addresses',
                            message_contains='at most 2 admins')
        self.assertEqual(int(r.cli('SCARD', 'ent:{%s}:admins' % eid)), 0)
        self.assertOk(admins(others[:2]), 200)

        body = {'names': ['a', 'b', 'c', 'd'], 'descriptions': ['', '', '', ''], 'entityID': eid}
        self.assertEnvelope(self.req(svc, 'POST', '/api/skills/multiple?' + q, body), 409,
                            'conflict', message_contains='at most 3 skills')
        self.assertEqual(int(r.cli('HLEN', 'ent:{%s}:skills' % eid)), 0)
        for _ in range(3):
            self.assertOk(self.add_skill(svc, owner, eid), 201)
        self.assertEnvelope(self.add_skill(svc, owner, eid), 409, 'conflict')

        def level(lv):
            return self.req(svc, 'POST', '/api/entities/%s/levels/%s/update?%s' % (eid, lv, q),
                            {'name': 'L', 'skillIds': [], 'scores': [], 'XP': 1})
        self.assertOk(level('one'), 201)
        self.assertOk(level('two'), 201)
        self.assertEnvelope(level('three'), 409, 'conflict', 'lvID',
                            message_contains='at most 2 levels')
        self.assertOk(level('two'), 200)  # replacing a level is not adding one
        self.assertEqual(int(r.cli('HLEN', 'ent:{%s}:levels' % eid)), 2)

    def test_contributions_per_member_per_minute(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'CONTRIBUTIONS_PER_MEMBER_PER_MINUTE': '5'})
        owner = self.pool.pop()
        m1, m2 = [w.address for w in harness.Wallet.random(2)]
        eid = self.assertOk(self.create(svc, owner), 201)['data']['id']
        q = self.auth(svc, owner)
        self.assertOk(self.req(svc, 'POST', '/api/entities/%s/force-add?%s' % (eid, q),
                               {'addresses': [m1, m2], 'Chain': 'eth'}), 200)

        def award(items):
            return self.req(svc, 'POST', '/api/entities/%s/contributions?%s' % (eid, q),
                            {'contributions': [{'member': m, 'xp': 1, 'title': 't'}
                                               for m in items]})
        self.assertOk(award([m1, m1, m1, m2]), 201)
        # A batch that would pass the most for one member is refused whole.
        limited = award([m2, m1, m1, m1])
        retry = self.assertLimited(limited)
        self.assertLessEqual(retry, 60)
        self.assertIn(m1, limited[2]['error']['message'])
        self.assertEqual(r.cli('HGET', 'ent:{%s}:prog:%s' % (eid, m2), 'xp'), b'1')
        self.assertOk(award([m1, m1]), 201)
        self.assertLimited(award([m1]))
        self.assertOk(award([m2, m2, m2, m2]), 201)
        self.assertEqual(r.cli('HGET', 'ent:{%s}:prog:%s' % (eid, m1), 'xp'), b'5')
        ttl = int(r.cli('PTTL', 'ent:{%s}:awards:%s' % (eid, m1)))
        self.assertGreater(ttl, 0)
        self.assertLessEqual(ttl, 60000)


class TraceContextTest(LimitsBase):
    VALID = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'

    def test_traceparent_is_logged_and_echoed(self):
        svc = self.entityd(redis=self.redis(), env={'LOG_LEVEL': 'info'})
        status, headers, _ = self.req(svc, 'GET', '/healthz',
                                      headers={'traceparent': self.VALID,
                                               'X-Request-Id': 'trace-ok'})
        self.assertEqual(status, 200)
        self.assertEqual(headers.get('traceparent'), self.VALID)
        bad = ['00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01',  # upper case
               '00-00000000000000000000000000000000-00f067aa0ba902b7-01',  # zero trace id
               '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',  # zero parent id
               'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',  # version ff
               '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x',  # 00 is 55 long
               '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01',
               'garbage', '']
        for i, v in enumerate(bad):
            status, headers, body = self.req(svc, 'GET', '/healthz',
                                             headers={'traceparent': v,
                                                      'X-Request-Id': 'trace-bad-%d' % i})
            self.assertEqual(status, 200, (v, body))
            self.assertNotIn('traceparent', headers, v)
        # A later version may carry more fields: its first 55 characters are read.
        future = '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra'
        status, headers, _ = self.req(svc, 'GET', '/healthz',
                                      headers={'traceparent': future, 'X-Request-Id': 'trace-v1'})
        self.assertEqual(headers.get('traceparent'), future[:55])
        # Without one, none is made up.
        status, headers, _ = self.req(svc, 'GET', '/healthz', headers={'X-Request-Id': 'trace-no'})
        self.assertNotIn('traceparent', headers)

        def lines():
            out = {}
            for l in svc.stdout().splitlines():
                rec = json.loads(l)
                if rec.get('msg') == 'request':
                    out[rec['request_id']] = rec
            return out
        harness.wait_for(lambda: 'trace-no' in lines(), scaled(5), what='request lines')
        recs = lines()
        self.assertEqual(recs['trace-ok']['trace_id'], '4bf92f3577b34da6a3ce929d0e0e4736')
        self.assertEqual(recs['trace-v1']['trace_id'], '4bf92f3577b34da6a3ce929d0e0e4736')
        for i in range(len(bad)):
            self.assertNotIn('trace_id', recs['trace-bad-%d' % i])
        self.assertNotIn('trace_id', recs['trace-no'])


class CorsTest(LimitsBase):
    PREFLIGHT = {'Origin': 'https://app.example', 'Access-Control-Request-Method': 'POST',
                 'Access-Control-Request-Headers': 'content-type, traceparent'}

    def cors_headers(self, headers):
        return {k: v for k, v in headers.items() if k.startswith('access-control-')}

    def test_listed_origin(self):
        svc = self.entityd(redis=self.redis(),
                           env={'CORS_ORIGINS': 'https://other.example, https://app.example'})
        status, headers, body = self.req(svc, 'OPTIONS', '/api/entities', headers=self.PREFLIGHT)
        self.assertEqual(status, 204, body)
        self.assertEqual(body, b'')
        self.assertNotIn('content-length', headers)
        self.assertEqual(headers['access-control-allow-origin'], 'https://app.example')
        self.assertEqual(headers['access-control-allow-methods'], 'GET, POST')
        allowed = [h.strip().lower() for h in headers['access-control-allow-headers'].split(',')]
        for h in ('content-type', 'x-request-id', 'traceparent'):
            self.assertIn(h, allowed)
        self.assertRegex(headers['access-control-max-age'], r'^[1-9][0-9]*$')
        self.assertEqual(headers['vary'], 'Origin')
        self.assertIn('x-request-id', headers)
        # A path with parameters: the methods of that route.
        status, headers, _ = self.req(svc, 'OPTIONS', '/api/entities/c-x/admins',
                                      headers=self.PREFLIGHT)
        self.assertEqual(status, 204)
        self.assertEqual(headers['access-control-allow-methods'], 'GET, POST')
        # An unknown route is still 404.
        status, _, _ = self.req(svc, 'OPTIONS', '/api/nothing', headers=self.PREFLIGHT)
        self.assertEqual(status, 404)
        # The real request from that origin carries the grant.
        status, headers, _ = self.req(svc, 'GET', '/api/auth/message',
                                      headers={'Origin': 'https://app.example'})
        self.assertEqual(status, 200)
        self.assertEqual(headers['access-control-allow-origin'], 'https://app.example')
        self.assertIn('Retry-After', headers['access-control-expose-headers'])
        self.assertEqual(headers['vary'], 'Origin')
        # An unlisted origin gets no CORS headers, on the preflight or the request.
        evil = dict(self.PREFLIGHT, Origin='https://evil.example')
        status, headers, _ = self.req(svc, 'OPTIONS', '/api/entities', headers=evil)
        self.assertEqual(status, 204)
        self.assertEqual(self.cors_headers(headers), {})
        status, headers, _ = self.req(svc, 'GET', '/api/auth/message',
                                      headers={'Origin': 'https://app.example.evil'})
        self.assertEqual(status, 200)
        self.assertEqual(self.cors_headers(headers), {})
        # Error answers carry the grant too, so a page can read them.
        status, headers, _ = self.req(svc, 'GET', '/api/nothing',
                                      headers={'Origin': 'https://app.example'})
        self.assertEqual(status, 404)
        self.assertEqual(headers['access-control-allow-origin'], 'https://app.example')
        _, _, metrics = self.req(svc, 'GET', '/metrics')
        text = metrics.decode()
        self.assertIn('entityd_http_preflights_total{outcome="allowed"} 2', text)
        self.assertIn('entityd_http_preflights_total{outcome="refused"} 1', text)

    def test_wildcard(self):
        svc = self.entityd(redis=self.redis(), env={'CORS_ORIGINS': '*'})
        status, headers, _ = self.req(svc, 'OPTIONS', '/api/skills',
                                      headers=dict(self.PREFLIGHT, Origin='https://any.example'))
        self.assertEqual(status, 204)
        self.assertEqual(headers['access-control-allow-origin'], '*')
        self.assertEqual(headers['access-control-allow-methods'], 'GET, POST')

    def test_unset_is_as_before(self):
        svc = self.entityd(redis=self.redis())
        status, headers, body = self.req(svc, 'OPTIONS', '/api/entities', headers=self.PREFLIGHT)
        self.assertEnvelope((status, headers, body), 405, 'method_not_allowed')
        self.assertEqual(headers['allow'], 'GET, POST')
        status, headers, _ = self.req(svc, 'GET', '/api/auth/message',
                                      headers={'Origin': 'https://app.example'})
        self.assertEqual(status, 200)
        self.assertEqual(self.cors_headers(headers), {})
        self.assertNotIn('vary', headers)
        _, _, metrics = self.req(svc, 'GET', '/metrics')
        self.assertIn('entityd_http_preflights_total{outcome="allowed"} 0', metrics.decode())


if __name__ == '__main__':
    harness.main()
