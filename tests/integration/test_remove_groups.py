"""Removals of members from one entity that arrive in one loop turn leave as one script call
(service/redis/group.h, lua/members_remove.lua), whoever sends them: owners and admins removing
one or many, members leaving. Each still gets the answer it would have had alone, and the group
means the same as its removals sent one by one.

To put the requests in one turn for certain, entityd is stopped while each is written on its own
warm keep-alive connection, then continued (harness.one_turn). Hostile peers: clients that reset
while their grouped answer is owed, and a Redis that holds a group back past REDIS_TIMEOUT_MS
(the removals retried after their 504 end the same). After each, the data set's invariants
(tests/integration/invariants.py: every removed member's board entries waiting at its values,
nothing half-written). The wallet index's drops of the removed members (find_wallet_drop.lua)
leave as one call for the turn, too (api/findindex.h)."""

import json
import os
import socket
import struct
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
from invariants import check_invariants  # noqa: E402

WALLETS = 200
# The wallet index's grace: a drop skips an entry added within it (find_wallet_drop.lua).
GRACE_MS = 100


class RemoveGroupTest(harness.ServiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.r = cls.class_redis()
        # No read cache: its heartbeat is a PUBLISH on the store's connection, which CLIENT
        # PAUSE WRITE holds back too, and the sign-in checks behind it would time out.
        cls.svc = cls.class_entityd(redis=cls.r, env={'RATE_WRITES_PER_MINUTE': '0',
                                                      'REDIS_TIMEOUT_MS': '1000',
                                                      'READ_CACHE_MB': '0',
                                                      'SWEEP_PAUSED': 'true',
                                                      'FIND_REPAIR_GRACE_MS': str(GRACE_MS)})
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])

    def auth(self, w):
        return self.signer.query(w)

    def req(self, method, path, body=None):
        return harness.request(self.port, method, path, body=body, timeout=scaled(10))

    def setup_entity(self, members):
        """An entity with an admin and `members` members, each awarded XP and a skill score
        (so each is on two boards), already listed in the sweeps set by a first removal."""
        owner, admin, stranger, first = [self.pool.pop() for _ in range(4)]
        ms = [self.pool.pop() for _ in range(members)]
        eid = self.assertOk(self.req('POST', '/api/entities?' + self.auth(owner), {
            'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
            'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
            'imageUrl': '', 'public': True}), 201)['data']['id']
        self.assertOk(self.req('POST', '/api/entities/%s/admins?%s' % (eid, self.auth(owner)),
                               {'addresses': [admin.address]}))
        self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(owner)),
                               {'addresses': [m.address for m in ms + [first]],
                                'Chain': 'eth'}))
        sid = self.assertOk(self.req('POST', '/api/skills/multiple?' + self.auth(owner), {
            'entityID': eid, 'names': ['Skill A']}), 201)['data'][0]['id']
        self.assertOk(self.req('POST', '/api/entities/%s/contributions?%s' % (
            eid, self.auth(owner)), {'contributions': [
                {'member': m.address, 'title': 'Seed %d' % i, 'xp': i + 1,
                 'skills': [{'skillId': sid, 'score': i + 2}]}
                for i, m in enumerate(ms + [first])]}), 201)
        # The entity listed in the sweeps set now, by this process (jobs/sweeper.h): the
        # removals under test go straight to their script, none waits on a listing first.
        self.assertOk(self.req('DELETE', '/api/entities/%s/members/%s?%s' % (
            eid, first.address, self.auth(owner))))
        # Every caller's signature is checked once here, so that in the turn under test each
        # request reaches its handler at once (a signature recovery answers a turn later).
        for w in [owner, admin, stranger] + ms:
            self.req('GET', '/api/entities/%s?%s' % (eid, self.auth(w)))
        time.sleep(2 * GRACE_MS / 1000)  # the wallets' index entries now older than the grace
        return eid, owner, admin, stranger, ms, sid

    def remove_one(self, w, eid, m):
        return ('DELETE', '/api/entities/%s/members/%s?%s' % (eid, m.address, self.auth(w)), None)

    def remove_many(self, w, eid, addresses):
        return ('POST', '/api/entities/%s/members/remove?%s' % (eid, self.auth(w)),
                {'addresses': addresses})

    def leave(self, w, eid):
        return ('POST', '/api/entities/%s/leave?%s' % (eid, self.auth(w)), {})

    def evalsha_calls(self):
        for line in self.r.cli('INFO', 'commandstats').decode().splitlines():
            if line.startswith('cmdstat_evalsha:'):
                return int(line.split('calls=')[1].split(',')[0])
        return 0

    def wallet_lists(self, eid, ms):
        """The removed members whose wallet's member list still names the entity."""
        return [m.address for m in ms if any(e.decode().endswith(':' + eid) for e in self.r.cli(
            'ZRANGE', 'wallet:{%s}:member' % m.address.lower(), 0, -1) or [])]

    def script_calls(self):
        """Calls of members_remove.lua since the last CONFIG RESETSTAT: each sends one HDEL
        of the members hash, whatever it removes (nothing else here sends HDEL). Counting
        EVALSHA would count the wallet index's drops too (find_wallet_drop.lua, one a
        removed member: another slot in Redis Cluster)."""
        for line in self.r.cli('INFO', 'commandstats').decode().splitlines():
            if line.startswith('cmdstat_hdel:'):
                return int(line.split('calls=')[1].split(',')[0])
        return 0

    def one_turn(self, calls, before_continue=None):
        return harness.one_turn(self.svc, self.r, calls, before_continue)

    def answers(self, conns):
        return harness.read_answers(conns)

    def members(self, eid):
        return {a.decode() for a in self.r.cli('HKEYS', 'ent:{%s}:members' % eid) or []}

    def events(self, eid):
        out = []
        for _id, f in self.r.cli('XRANGE', 'ent:{%s}:events' % eid, '-', '+') or []:
            f = {f[i].decode(): f[i + 1].decode() for i in range(0, len(f), 2)}
            if f['type'] in ('member.removed', 'member.left'):
                out.append((f['type'], f['actor'], json.loads(f['data'])))
        return out[1:]  # the first is setup_entity's removal

    def tombstoned(self, eid):
        """The addresses with a tombstone on the XP board, and those waiting for the sweeper
        on the skill boards (lb:unswept), while it is held off."""
        ek = 'ent:{%s}' % eid
        return [{e.decode()[17:] for e in self.r.cli('ZRANGE', ek + ':lb:xp:gone', 0, -1) or []},
                {a.decode() for a in self.r.cli('SMEMBERS', ek + ':lb:unswept') or []}]

    # ---- tests ----

    def test_removals_of_one_turn_share_one_script_call(self):
        eid, owner, admin, _, ms, sid = self.setup_entity(24)
        version = self.r.cli('HGET', 'ent:{%s}' % eid, 'membersVersion')
        calls = [self.remove_one(owner if i % 2 else admin, eid, m) for i, m in enumerate(ms)]
        got = self.answers(self.one_turn(calls))
        self.assertEqual([(s, b.get('removed'), b.get('missing')) for s, b in got],
                         [(200, 1, 0)] * len(ms), got)
        # The grouping is what this test is about: without it, 24 script calls. The wallet
        # index's 24 drops follow the answers, as one call more (24 of one call each before).
        self.assertEqual(self.script_calls(), 1)
        harness.wait_for(lambda: not self.wallet_lists(eid, ms), scaled(5), interval=0.02,
                         what='the wallet index drops')
        self.assertEqual(self.evalsha_calls(), 2)
        gone = {m.address.lower() for m in ms}
        self.assertFalse(self.members(eid) & gone)
        for board in self.tombstoned(eid):
            self.assertTrue(gone <= board)
        self.assertNotEqual(self.r.cli('HGET', 'ent:{%s}' % eid, 'membersVersion'), version)
        # one event each, by its own caller
        evs = self.events(eid)
        self.assertEqual(sorted((t, a, d['addresses'][0]) for t, a, d in evs),
                         sorted(('member.removed', (owner if i % 2 else admin).address.lower(),
                                 m.address.lower()) for i, m in enumerate(ms)))
        self.assertEqual(check_invariants(self.r), [])
        # re-added, each is back on the boards with what it had
        self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(owner)),
                               {'addresses': [ms[5].address], 'Chain': 'eth'}))
        board = self.assertOk(self.req('GET', '/api/entities/%s/leaderboard?by=xp&limit=100&%s'
                                       % (eid, self.auth(owner))))['data']
        self.assertEqual([(e['member'], e['value']) for e in board], [(ms[5].address.lower(), 6)])
        self.assertEqual(check_invariants(self.r), [])

    def test_each_removal_of_a_group_gets_its_own_answer(self):
        eid, owner, admin, stranger, ms, sid = self.setup_entity(8)
        outsider = self.pool.pop()
        a, b, c, d, e, f, g, h = ms
        calls = [
            self.remove_one(owner, eid, a),                                  # removed
            self.remove_one(admin, eid, a),                                  # a gone already
            self.remove_one(stranger, eid, b),                               # 403
            self.leave(c, eid),                                              # c leaves
            self.remove_many(owner, eid, [d.address, e.address, outsider.address]),
            self.remove_one(owner, eid, b),                                  # b after the 403
            self.leave(outsider, eid),                                       # not a member
            self.remove_many(admin, eid, [f.address, d.address]),            # d gone already
        ]
        got = self.answers(self.one_turn(calls))
        self.assertEqual(self.script_calls(), 1)
        want = [(200, 1, 0), (200, 0, 1), (403, None, None), (200, 1, None), (200, 2, 1),
                (200, 1, 0), (200, 0, None), (200, 1, 1)]
        self.assertEqual([(s, body.get('removed'), body.get('missing')) for s, body in got],
                         want, got)
        self.assertEqual(got[2][1]['error']['code'], 'forbidden')
        self.assertEqual(self.members(eid) & {m.address.lower() for m in ms},
                         {g.address.lower(), h.address.lower()})
        xp_gone, skill_gone = self.tombstoned(eid)
        removed = {m.address.lower() for m in (a, b, c, d, e, f)}
        self.assertTrue(removed <= xp_gone and removed <= skill_gone)
        self.assertFalse({g.address.lower(), h.address.lower()} & (xp_gone | skill_gone))
        low = lambda w: w.address.lower()  # noqa: E731
        self.assertEqual(sorted(json.dumps(x, sort_keys=True) for x in self.events(eid)),
                         sorted(json.dumps(x, sort_keys=True) for x in [
                             ('member.removed', low(owner), {'addresses': [low(a)]}),
                             ('member.left', low(c), {'address': low(c)}),
                             ('member.removed', low(owner), {'addresses': [low(d), low(e)]}),
                             ('member.removed', low(owner), {'addresses': [low(b)]}),
                             ('member.removed', low(admin), {'addresses': [low(f)]})]))
        users = self.assertOk(self.req('GET', '/api/entities/%s/users?limit=100&%s' % (
            eid, self.auth(owner))))['users']
        self.assertEqual({u['address'] for u in users}, {low(g), low(h)})
        self.assertEqual(check_invariants(self.r), [])

    def test_clients_reset_while_their_grouped_answers_are_owed(self):
        eid, owner, admin, _, ms, sid = self.setup_entity(20)
        calls = [self.remove_one(owner, eid, m) for m in ms]

        def reset_half(conns):
            for c in conns[::2]:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                c.close()  # RST with the request unanswered

        conns = self.one_turn(calls, reset_half)
        got = self.answers(conns[1::2])
        self.assertEqual([(s, b.get('removed')) for s, b in got], [(200, 1)] * len(got), got)
        self.assertTrue(self.svc.alive())
        # The reset requests were read before the reset reached the service, or not at all:
        # whichever, each removal is whole, and the answered ones are done.
        left = self.members(eid)
        for m in ms[1::2]:
            self.assertNotIn(m.address.lower(), left)
        self.assertEqual(check_invariants(self.r), [])
        self.assertOk(self.req('GET', '/api/entities/%s?%s' % (eid, self.auth(owner))))

    def test_a_group_past_its_deadline_retried_ends_the_same(self):
        """Redis holds the group back past REDIS_TIMEOUT_MS (1 s): each removal answers 504,
        its outcome unknown to the caller, and the group runs once Redis goes on. Retried, each
        answers 200 with its members missing: the end state of removals answered at once,
        every member removed, tombstoned and named by exactly one event."""
        eid, owner, admin, _, ms, sid = self.setup_entity(6)
        calls = [self.remove_one(owner, eid, m) for m in ms[:3]] + \
            [self.remove_many(admin, eid, [m.address for m in ms[3:]])]

        def pause_writes(_conns):
            # the sign-in checks are read on time; the group's script waits behind the pause
            # held until the answers are read (well past the deadline however slow the machine)
            self.r.cli('CLIENT', 'PAUSE', '60000', 'WRITE')
            self.addCleanup(self.r.cli, 'CLIENT', 'UNPAUSE')

        got = self.answers(self.one_turn(calls, pause_writes))
        self.assertEqual([s for s, _ in got], [504] * 4, got)
        self.r.cli('CLIENT', 'UNPAUSE')
        low = {m.address.lower() for m in ms}
        harness.wait_for(lambda: not self.members(eid) & low, scaled(5),
                         what='the held group to run')
        again = [self.req(method, path, body) for method, path, body in calls]
        self.assertEqual([(st, b.get('removed'), b.get('missing')) for st, _, b in again],
                         [(200, 0, 1)] * 3 + [(200, 0, 3)], again)
        named = [a for t, _, d in self.events(eid) for a in d['addresses']]
        self.assertEqual(sorted(named), sorted(low))
        for board in self.tombstoned(eid):
            self.assertTrue(low <= board)
        self.assertEqual(check_invariants(self.r), [])


if __name__ == '__main__':
    harness.main()
