"""The re-check of rules members (CONTRACT section 16, "Staying true"; jobs/joinsweep.h), with
`role` leaves (no chain): a rule {"role": {"entityID": B, "role": "member"}} holds while the
wallet is a member of B, and removing it from B makes it fail. A member failing since a check
at t is removed (event member.lapsed with the failing leaves) at the first failing check at or
after t + JOIN_GRACE_SECONDS, not before; a pass in between resets t; a member failing within
the grace after joining goes at once; a rule changed since the join is the one every member is
checked by next; force-added members (and a rules member force-added
since) are never checked; an instance killed (SIGKILL) mid-sweep leaves its entity's lease, and
another instance finishes the sweep once the lease has run out, each member lapsing once.
On a ganache chain with an ERC-20 leaf: a token transferred away lapses its member after the
grace and not before; a chain that stalls, then dies (connections refused), during the
re-checks removes nobody and starts no grace, and the next period after it is back catches up.
Every wait is on the service's own answers (the events list, the users list), with deadlines
that have slack."""

import json
import os
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402

PERIOD = 2  # JOIN_RECHECK_SECONDS of the instances here
LEASE_MS = 10000  # jobs/joinsweep.c, JS_LEASE_MS
# How far the service's ms (addedAt, Redis's TIME in the events' "at") may lie from this
# process's clock: the same machine, whole milliseconds.
SKEW = 0.05


def _parse(iso):
    import datetime
    dt = datetime.datetime.strptime(iso, '%Y-%m-%dT%H:%M:%S.%fZ').replace(
        tzinfo=datetime.timezone.utc)
    return dt.timestamp()


class JoinSweepBase(harness.ServiceTestCase):
    GRACE = 3

    @classmethod
    def env_for(cls, **more):
        env = {'JOIN_RECHECK_SECONDS': str(PERIOD), 'JOIN_GRACE_SECONDS': str(cls.GRACE)}
        env.update(more)
        return env

    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(40)
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env=cls.env_for())
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])
        cls.owner = cls.pool.pop()

    # ---- helpers ----

    def call(self, method, path, body=None, w=None, port=None):
        path += ('&' if '?' in path else '?') + self.signer.query(w or self.owner)
        return harness.request(port or self.port, method, path, body=body, timeout=scaled(20))

    def entity(self):
        body = {'name': 'Guild ' + uuid.uuid4().hex[:8], 'description': '',
                'ownerAddresses': [self.owner.address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'public': True}
        return self.assertOk(self.call('POST', '/api/entities', body), 201)['data']['id']

    def gated(self):
        """(A, B): A's rule asks for membership in B."""
        b = self.entity()
        a = self.entity()
        self.assertOk(self.call('POST', '/api/entities/%s/join-rules' % a, {
            'rule': {'role': {'entityID': b, 'role': 'member'}}}))
        return a, b

    def force_add(self, eid, addrs):
        for i in range(0, len(addrs), 1000):
            self.assertOk(self.call('POST', '/api/entities/%s/force-add' % eid,
                                    {'addresses': addrs[i:i + 1000], 'Chain': 'eth'}))

    def remove(self, eid, addrs):
        for i in range(0, len(addrs), 1000):
            self.assertOk(self.call('POST', '/api/entities/%s/members/remove' % eid,
                                    {'addresses': addrs[i:i + 1000]}))

    def join(self, eid, w, port=None):
        out = self.assertOk(self.call('POST', '/api/entities/%s/join' % eid, {}, w=w, port=port))
        self.assertEqual(out['joined'], 1)

    def events(self, eid, port=None):
        out, after = [], None
        for _ in range(1000):
            path = '/api/entities/%s/events?limit=1000' % eid
            if after:
                path += '&after=' + after
            b = self.assertOk(self.call('GET', path, port=port))
            out += b['data']
            after = b['nextCursor']
            if not after:
                return out
        raise AssertionError('the event pages did not end')

    def lapses(self, eid, port=None):
        return [e for e in self.events(eid, port) if e['type'] == 'member.lapsed']

    def wait_lapsed(self, eid, addr, timeout):
        def found():
            got = [e for e in self.lapses(eid) if e['data']['address'] == addr]
            return got[0] if got else None
        return harness.wait_for(found, scaled(timeout), interval=0.1,
                                what='member.lapsed of %s' % addr)

    def lapsed_kept(self, eid):
        """The addresses of the member.lapsed events in the entity's stream, read from Redis."""
        out = set()
        for _, fields in self.r.cli('XRANGE', 'ent:{%s}:events' % eid, '-', '+'):
            f = dict(zip(fields[::2], fields[1::2]))
            if f[b'type'] == b'member.lapsed':
                out.add(json.loads(f[b'data'])['address'])
        return out

    def users(self, eid):
        out, cursor = {}, None
        for _ in range(1000):
            path = '/api/entities/%s/users?limit=1000' % eid
            if cursor:
                path += '&cursor=' + cursor
            b = self.assertOk(self.call('GET', path))
            for u in b['users']:
                out[u['address']] = u
            cursor = b['nextCursor']
            if not cursor:
                return out
        raise AssertionError('the user pages did not end')

    def joined_at(self, eid, addr):
        return _parse(self.users(eid)[addr]['addedAt'])


class JoinSweepTest(JoinSweepBase):
    """JOIN_RECHECK_SECONDS=2, JOIN_GRACE_SECONDS=3."""

    def test_lapses_after_the_grace_and_not_before(self):
        a, b = self.gated()
        w = self.pool.pop()
        self.force_add(b, [w.address])
        self.join(a, w)
        joined = self.joined_at(a, w.address)
        # past the grace after joining: a failure now starts the grace instead of removing
        time.sleep(max(0.0, joined + self.GRACE + 0.3 - time.time()))
        failing_from = time.time()
        self.remove(b, [w.address])
        ev = self.wait_lapsed(a, w.address, 30)
        lapsed = _parse(ev['at'])
        # the first failing check is at or after the removal from B; the lapse is the first
        # failing check at or after that one plus the grace
        self.assertGreaterEqual(lapsed, failing_from + self.GRACE - SKEW)
        self.assertFalse(ev['actor'])  # the service's own doing: no caller
        self.assertEqual([l['path'] for l in ev['data']['leaves']], ['rule'])
        self.assertFalse(ev['data']['leaves'][0]['ok'])
        self.assertEqual(ev['data']['leaves'][0]['need'], 'member')
        self.assertNotIn(w.address, self.users(a))
        # one lapse, no other removal event
        kinds = [e['type'] for e in self.events(a) if e['data'].get('address') == w.address]
        self.assertEqual(kinds, ['member.joined', 'member.lapsed'])

    def test_a_pass_in_between_resets_the_grace(self):
        a, b = self.gated()
        w = self.pool.pop()
        self.force_add(b, [w.address])
        self.join(a, w)
        joined = self.joined_at(a, w.address)
        time.sleep(max(0.0, joined + self.GRACE + 0.3 - time.time()))
        failing_key = 'ent:{%s}:join:failing' % a
        self.remove(b, [w.address])
        since = harness.wait_for(lambda: self.r.cli('HGET', failing_key, w.address),
                                 scaled(20), what='a failing check')
        since = int(since) / 1000.0
        self.force_add(b, [w.address])  # holds again: the next check passes
        harness.wait_for(lambda: self.r.cli('HEXISTS', failing_key, w.address) == 0,
                         scaled(20), what='a passing check')
        self.assertIn(w.address, self.users(a))
        # failing again once the first failure's grace has run: without the reset, the first
        # failing check would remove it
        time.sleep(max(0.0, since + self.GRACE + 0.2 - time.time()))
        again = time.time()
        self.remove(b, [w.address])
        ev = self.wait_lapsed(a, w.address, 30)
        self.assertGreaterEqual(_parse(ev['at']), again + self.GRACE - SKEW)

    def test_force_added_members_are_never_checked(self):
        a, b = self.gated()
        manual, convert = self.pool.pop(), self.pool.pop()
        self.force_add(b, [convert.address])
        self.force_add(a, [manual.address])  # never in B: would fail any check
        self.join(a, convert)
        # a force-add of a rules member makes it manual (CONTRACT section 16)
        self.force_add(a, [convert.address])
        self.remove(b, [convert.address])
        users = self.users(a)
        self.assertEqual(users[convert.address].get('via'), 'manual')
        # a rules member joining after both, so due after both: once it lapsed, both had
        # their turn had they been checked (convert would have lapsed at once, within the
        # grace after joining)
        late = self.pool.pop()
        self.force_add(b, [late.address])
        self.join(a, late)
        self.remove(b, [late.address])
        self.wait_lapsed(a, late.address, 30)
        gone = {e['data']['address'] for e in self.lapses(a)}
        self.assertEqual(gone, {late.address})
        users = self.users(a)
        for w in (manual, convert):
            self.assertIn(w.address, users)


class JoinSweepAtOnceTest(JoinSweepBase):
    """JOIN_GRACE_SECONDS=60: a member failing within it after joining goes at its first
    failing check; no one older than it is removed before a minute of failing."""
    GRACE = 60

    def test_failing_within_the_grace_after_joining_goes_at_once(self):
        a, b = self.gated()
        w = self.pool.pop()
        self.force_add(b, [w.address])
        self.join(a, w)
        joined = self.joined_at(a, w.address)
        self.remove(b, [w.address])
        ev = self.wait_lapsed(a, w.address, 30)
        self.assertLess(_parse(ev['at']), joined + self.GRACE)
        self.assertGreaterEqual(_parse(ev['at']), joined + PERIOD - SKEW)
        self.assertNotIn(w.address, self.users(a))
        self.assertEqual(self.r.cli('ZSCORE', 'ent:{%s}:join:due' % a, w.address), None)

    def test_a_rule_change_checks_every_member_by_the_new_rule(self):
        a, b = self.gated()
        c = self.entity()
        w = self.pool.pop()
        self.force_add(b, [w.address])
        self.join(a, w)
        # the new rule asks for membership in C, which w never had
        self.assertOk(self.call('POST', '/api/entities/%s/join-rules' % a, {
            'rule': {'any': [{'role': {'entityID': c, 'role': 'member'}},
                             {'role': {'entityID': c, 'role': 'owner'}}]}}))
        ev = self.wait_lapsed(a, w.address, 30)
        self.assertEqual([(l['path'], l['need']) for l in ev['data']['leaves']],
                         [('rule.any[0]', 'member'), ('rule.any[1]', 'owner')])


class JoinSweepKillTest(JoinSweepBase):
    """An instance killed (SIGKILL) mid-sweep, some of its entity's failing members lapsed by it
    and others due: the entity's lease stays with the dead instance until it runs out, then
    another instance finishes, every failing member lapsing exactly once."""
    GRACE = 60
    FIRST, REST = 100, 600  # REST: more than one batch
    KILL_PERIOD = 4  # the rest's two batches two seconds apart (paced over the period)

    @classmethod
    def env_for(cls, **more):
        # a lease of twice the batches' spacing: the other instance takes over 4 s after the
        # kill at most, not 10
        env = super().env_for(JOIN_RECHECK_SECONDS=str(cls.KILL_PERIOD), JOIN_LEASE_MS='4000')
        env.update(more)
        return env

    def redis_ms(self):
        sec, usec = self.r.cli('TIME')
        return int(sec) * 1000 + int(usec) // 1000

    def test_another_instance_finishes_a_killed_ones_sweep(self):
        a, b = self.gated()
        ws = harness.Wallet.random(self.FIRST + self.REST)
        addrs = [w.address for w in ws]
        first, rest = addrs[:self.FIRST], addrs[self.FIRST:]
        self.force_add(b, addrs)
        for w in ws:
            self.join(a, w)
        # the first part fails and lapses, by this instance
        self.remove(b, first)
        harness.wait_for(lambda: len(self.lapses(a)) >= self.FIRST, scaled(30), interval=0.1,
                         what='the first part lapsed')
        # just after one of its batches (every member due a good second on), the rest fails
        # and the instance dies before its next batch
        due = 'ent:{%s}:join:due' % a

        def after_a_batch():
            got = self.r.cli('ZRANGE', due, 0, 0, 'WITHSCORES')
            return got and int(float(got[1])) - self.redis_ms() > 1200
        harness.wait_for(after_a_batch, scaled(30), interval=0.02, what='a batch just ran')
        self.remove(b, rest)
        self.svc.kill()  # SIGKILL: no goodbye, the lease stays
        killed = time.time()
        pttl = int(self.r.cli('PTTL', 'ent:{%s}:join:lease' % a))
        self.assertGreater(pttl, 0)
        expires = time.time() + pttl / 1000.0
        before = self.lapsed_kept(a)  # read from Redis: no instance is up now
        self.assertEqual(before, set(first))
        other = self.class_entityd(redis=self.r, env=self.env_for())
        self.port = other.port
        harness.wait_for(lambda: len(self.lapses(a)) >= len(addrs), scaled(60) + pttl / 1000.0,
                         interval=0.2, what='every lapse')
        got = self.lapses(a)
        self.assertEqual(sorted(e['data']['address'] for e in got), sorted(addrs))
        for e in got:
            if e['data']['address'] in set(rest):
                # the other instance's: none before the killed one's lease ran out
                self.assertGreaterEqual(_parse(e['at']), expires - 0.2, e)
                self.assertGreater(_parse(e['at']), killed)
        self.assertEqual([u for u in self.users(a) if u in set(addrs)], [])


@unittest.skipUnless(harness.chain_available(), 'the test chain (tests/node) is not installed')
class JoinSweepChainTest(JoinSweepBase):
    """An ERC-20 leaf on a ganache chain behind a fault proxy; JOIN_RECHECK_SECONDS=2,
    JOIN_GRACE_SECONDS=3."""

    @classmethod
    def env_for(cls, **more):
        env = super().env_for(ETH_RPC_URLS='%d=%s' % (cls.chain.chain_id,
                                                      harness.proxy_url(cls.proxy)),
                              MULTICALL3_ADDRESS=cls.chain.multicall, ETH_RPC_TIMEOUT_MS='1000')
        env.update(more)
        return env

    @classmethod
    def setUpClass(cls):
        cls.chain = harness.JoinChain()
        cls.proxy = cls.chain.proxy()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.proxy.stop()
        cls.chain.stop()

    def tearDown(self):
        self.proxy.release()
        super().tearDown()

    def token_gated(self):
        a = self.entity()
        self.assertOk(self.call('POST', '/api/entities/%s/join-rules' % a, {
            'rule': {'erc20': {'chainId': self.chain.chain_id, 'contract': self.chain.erc20,
                               'min': '5'}}}))
        return a

    def holder(self, a):
        """A wallet holding 10 tokens, joined by the rule, past the grace after joining."""
        w = self.pool.pop()
        self.chain.mint('erc20', w.address, amount=10)
        self.join(a, w)
        joined = self.joined_at(a, w.address)
        time.sleep(max(0.0, joined + self.GRACE + 0.3 - time.time()))
        return w

    def due(self, a, addr):
        v = self.r.cli('ZSCORE', 'ent:{%s}:join:due' % a, addr)
        return int(float(v)) if v is not None else None

    def test_a_token_transferred_away_lapses_after_the_grace(self):
        a = self.token_gated()
        w = self.holder(a)
        away = time.time()
        self.chain.transfer('erc20', w.address, self.pool.pop().address, amount=10)
        ev = self.wait_lapsed(a, w.address, 30)
        self.assertGreaterEqual(_parse(ev['at']), away + self.GRACE - SKEW)
        self.assertEqual(ev['data']['leaves'], [{'path': ev['data']['leaves'][0]['path'],
                                                 'ok': False, 'have': '0', 'need': '5'}])
        self.assertNotIn(w.address, self.users(a))

    def test_a_stalled_or_dead_chain_removes_nobody_and_the_next_period_catches_up(self):
        a = self.token_gated()
        w = self.holder(a)
        failing_key = 'ent:{%s}:join:failing' % a
        self.proxy.stall()
        # fails from now on, but no check can tell while the chain does not answer
        self.chain.transfer('erc20', w.address, self.pool.pop().address, amount=10)

        def checked_past(t_ms):
            return lambda: (self.due(a, w.address) or 0) > t_ms + PERIOD * 1000

        # two periods of erring checks on the stalled chain, then one on a dead one
        for _ in range(2):
            harness.wait_for(checked_past(int(time.time() * 1000)), scaled(30),
                             interval=0.1, what='an erring check on the stalled chain')
        self.proxy.release()
        self.proxy.cut(refuse_s=600)
        harness.wait_for(checked_past(int(time.time() * 1000)), scaled(30), interval=0.1,
                         what='an erring check on the dead chain')
        self.assertIn(w.address, self.users(a))
        self.assertEqual(self.r.cli('HGET', failing_key, w.address), None)
        self.assertEqual(self.lapses(a), [])
        back = time.time()
        self.proxy.release()
        ev = self.wait_lapsed(a, w.address, 30)
        # the first failing check counted is the first after the chain came back
        self.assertGreaterEqual(_parse(ev['at']), back + self.GRACE - SKEW)


if __name__ == '__main__':
    harness.main()
