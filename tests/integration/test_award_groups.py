"""Awards to one entity by one caller that arrive in one loop turn leave as one script call
(service/redis/group.h): they share the turn's time, so the caller and the time travel once. Each
still gets the answer it would have had alone.

To put many awards in one turn for certain, entityd is stopped while each of them is written on
its own warm keep-alive connection, then continued (harness.one_turn). The write budget is off
(RATE_WRITES_PER_MINUTE=0), so every EVALSHA Redis counts is an award's. Hostile peers: clients
that reset while their grouped answer is owed, and a Redis that holds a group back past
REDIS_TIMEOUT_MS. After each, the invariants: every stored contribution has its score, its index
entry and exactly one event, and nothing else is there."""

import datetime
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

WALLETS = 160
CALLS = 24  # below GROUP_MAX_CALLS (32): one group


class AwardGroupTest(harness.ServiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.r = cls.class_redis(extra_args=['--enable-debug-command', 'local'])
        # No read cache: its heartbeat is a PUBLISH on the store's connection, which CLIENT
        # PAUSE WRITE holds back too, and the sign-in checks behind it would time out.
        # The per-member award limit is on (600 a minute), as in production: the group's awards
        # count against it together.
        cls.svc = cls.class_entityd(redis=cls.r, env={'RATE_WRITES_PER_MINUTE': '0',
                                                      'CONTRIBUTIONS_PER_MEMBER_PER_MINUTE': '600',
                                                      'REDIS_TIMEOUT_MS': '1000',
                                                      'READ_CACHE_MB': '0'})
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])

    def auth(self, w):
        return self.signer.query(w)

    def req(self, method, path, body=None):
        return harness.request(self.port, method, path, body=body, timeout=scaled(10))

    def setup_entity(self, members):
        owner, admin, stranger = [self.pool.pop() for _ in range(3)]
        ms = [self.pool.pop() for _ in range(members)]
        eid = self.assertOk(self.req('POST', '/api/entities?' + self.auth(owner), {
            'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
            'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
            'imageUrl': '', 'public': True}), 201)['data']['id']
        self.assertOk(self.req('POST', '/api/entities/%s/admins?%s' % (eid, self.auth(owner)),
                               {'addresses': [admin.address]}))
        self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(owner)),
                               {'addresses': [m.address for m in ms], 'Chain': 'eth'}))
        out = self.assertOk(self.req('POST', '/api/skills/multiple?' + self.auth(owner), {
            'entityID': eid, 'names': ['Skill A', 'Skill B']}), 201)
        sids = [s['id'] for s in out['data']]
        # Every caller's signature is checked once here, so that in the turn under test each
        # award reaches its handler at once (a signature recovery would answer a turn later).
        for w in (owner, admin, stranger):
            self.req('GET', '/api/entities/%s?%s' % (eid, self.auth(w)))
        return eid, owner, admin, stranger, ms, sids

    def path(self, w, eid):
        return '/api/entities/%s/contributions?%s' % (eid, self.auth(w))

    def evalshas(self):
        for line in self.r.cli('INFO', 'commandstats').decode().splitlines():
            if line.startswith('cmdstat_evalsha:'):
                return int(line.split('calls=')[1].split(',')[0])
        return 0

    def one_turn(self, calls, before_continue=None):
        """Each (path, body) POSTed in one loop turn (harness.one_turn)."""
        return harness.one_turn(self.svc, self.r, [('POST', p, b) for p, b in calls],
                                before_continue)

    def answers(self, conns):
        return harness.read_answers(conns)

    def check_invariants(self, eid, sids):
        """Every stored contribution has its scores, its index entry and exactly one event;
        every score and every event belongs to a stored contribution."""
        ek = 'ent:{%s}' % eid
        flat = self.r.cli('HGETALL', ek + ':contribs') or []
        records = [json.loads(flat[i + 1]) for i in range(0, len(flat), 2)]
        want = {}
        for c in records:
            if c['revoked']:
                continue
            p = want.setdefault(c['member'], {})
            p['xp'] = p.get('xp', 0) + c['xp']
            for s in c['skills']:
                p['s:' + s['skillId']] = p.get('s:' + s['skillId'], 0) + s['score']
            of = self.r.cli('ZRANGE', '%s:contribs:of:%s' % (ek, c['member']), 0, -1) or []
            self.assertTrue(any(x.decode().endswith(':' + c['id']) for x in of), c['id'])
        for member, p in want.items():
            flat = self.r.cli('HGETALL', '%s:prog:%s' % (ek, member)) or []
            have = {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)
                    if not flat[i].startswith(b'r:')}
            self.assertEqual(have, p, member)
        added = []
        for _id, fields in self.r.cli('XRANGE', ek + ':events', '-', '+') or []:
            f = {fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)}
            if f['type'] == 'contribution.added':
                added.append(json.loads(f['data'])['id'])
        self.assertEqual(sorted(added), sorted(c['id'] for c in records))
        return records

    # ---- tests ----

    def test_awards_of_one_turn_share_one_script_call(self):
        eid, owner, admin, _, ms, (s1, s2) = self.setup_entity(CALLS)
        calls = [(self.path(owner if i % 2 else admin, eid),
                  {'member': m.address, 'title': 'Grouped %d' % i,
                   'skills': [{'skillId': s1 if i % 3 else s2, 'score': i + 1}]})
                 for i, m in enumerate(ms)]
        before = time.time()
        got = self.answers(self.one_turn(calls))
        after = time.time()
        self.assertEqual([s for s, _ in got], [201] * CALLS, got)
        # The grouping is what this test is about: without it, 24 calls; one per caller.
        self.assertEqual(self.evalshas(), 2)
        # One turn, one time: read once, after the requests were sent.
        stamps = {body['data']['createdAt'] for _, body in got}
        self.assertEqual(len(stamps), 1, stamps)
        at = datetime.datetime.fromisoformat(stamps.pop().replace('Z', '+00:00')).timestamp()
        self.assertTrue(before - 0.002 <= at <= after, (before, at, after))
        for (status, body), m, i in zip(got, ms, range(CALLS)):
            self.assertEqual((body['data']['member'], body['data']['title']),
                             (m.address.lower(), 'Grouped %d' % i))
        records = self.check_invariants(eid, (s1, s2))
        self.assertEqual(len(records), CALLS)

    def test_a_full_group_and_another_entity_make_their_own_calls(self):
        a_eid, a_owner, _, _, a_ms, (a_s1, _) = self.setup_entity(40)
        b_eid, b_owner, _, _, b_ms, (b_s1, _) = self.setup_entity(4)
        calls = [(self.path(a_owner, a_eid), {'member': m.address, 'title': 'A %d' % i,
                                              'skills': [{'skillId': a_s1, 'score': 1}]})
                 for i, m in enumerate(a_ms)]
        calls[10:10] = [(self.path(b_owner, b_eid), {'member': m.address, 'title': 'B %d' % i,
                                                     'xp': 3}) for i, m in enumerate(b_ms)]
        got = self.answers(self.one_turn(calls))
        self.assertEqual([s for s, _ in got], [201] * len(calls), got)
        for (path, body), (_, answer) in zip(calls, got):
            self.assertEqual(answer['data']['title'], body['title'])
        # 40 to one entity: a full group of 32 and one of 8; the other entity's 4: one more.
        self.assertEqual(self.evalshas(), 3)
        self.assertEqual(len(self.check_invariants(a_eid, ())), 40)
        self.assertEqual(len(self.check_invariants(b_eid, ())), 4)

    def test_each_award_of_a_group_gets_its_own_answer(self):
        eid, owner, admin, stranger, ms, (s1, s2) = self.setup_entity(4)
        outsider = self.pool.pop()
        key = 'grouped-%s' % uuid.uuid4().hex[:8]
        good = {'member': ms[0].address, 'title': 'Good', 'skills': [{'skillId': s1, 'score': 2}]}
        x = {'member': ms[1].address, 'title': 'X', 'skills': [{'skillId': s1, 'score': 3}],
             'idempotencyKey': key}
        y = dict(x, title='Y')
        calls = [
            (self.path(owner, eid), good),
            (self.path(admin, eid), {'member': outsider.address, 'title': 'Not a member',
                                     'skills': [{'skillId': s1, 'score': 1}]}),
            (self.path(stranger, eid), dict(good, title='By a stranger')),
            (self.path(owner, eid), x),
            (self.path(owner, eid), x),
            (self.path(owner, eid), y),
            (self.path(admin, eid), {'contributions': [
                {'member': ms[2].address, 'title': 'Batch 0', 'skills': [{'skillId': s2, 'score': 5}]},
                {'member': ms[2].address, 'title': 'Batch 1',
                 'skills': [{'skillId': 's-' + str(uuid.uuid4()), 'score': 1}]}]}),
            (self.path(admin, eid), dict(good, member=ms[3].address, title='Good too')),
        ]
        got = self.answers(self.one_turn(calls))
        self.assertEqual(self.evalshas(), 3)  # one group per caller: owner, admin, stranger
        self.assertEqual(got[0][0], 201)
        self.assertEqual((got[1][0], got[1][1]['error']['field']), (400, 'member'))
        self.assertEqual((got[2][0], got[2][1]['error']['code']), (403, 'forbidden'))
        # One of the three with the key was first; the same body again replays its answer, the
        # other body conflicts, whichever order the turn read them in.
        keyed = got[3:6]
        firsts = [i for i, (s, _) in enumerate(keyed) if s == 201]
        self.assertEqual(len(firsts), 1, keyed)
        first_title = [x, x, y][firsts[0]]['title']
        for i, (status, body) in enumerate(keyed):
            if i == firsts[0]:
                continue
            if [x, x, y][i]['title'] == first_title:
                self.assertEqual((status, body.get('replayed')), (200, True), body)
                self.assertEqual(body['data'], keyed[firsts[0]][1]['data'])
            else:
                self.assertEqual((status, body['error']['code']), (409, 'conflict'), body)
        self.assertEqual((got[6][0], got[6][1]['error']['field']),
                         (400, 'contributions[1].skills[0].skillId'))
        self.assertEqual(got[7][0], 201)
        records = self.check_invariants(eid, (s1, s2))
        self.assertEqual(sorted(c['title'] for c in records), sorted(['Good', first_title, 'Good too']))
        self.assertEqual(self.r.cli('EXISTS', 'ent:{%s}:prog:%s' % (eid, ms[2].address.lower())), 0)

    def test_awards_to_one_member_in_one_group(self):
        """The script leaves a group's board entries and contribution records for its end:
        several awards to one member in one group, one of them failing its check and one a
        replay, leave that member's boards with its final values only, reach a level once, and
        the per-member limit counts across the group."""
        eid, owner, admin, _, ms, (s1, s2) = self.setup_entity(3)
        m0, m1, m2 = [m.address.lower() for m in ms]
        ek = 'ent:{%s}' % eid
        self.assertOk(self.req('POST', '/api/entities/%s/levels/L1/update?%s' %
                               (eid, self.auth(owner)),
                               {'name': 'Level one', 'description': '', 'skillIds': [s1],
                                'scores': [5], 'endsAt': '', 'XP': 10}), 201)
        self.assertOk(self.req('POST', self.path(owner, eid), {
            'member': m0, 'title': 'Seed', 'xp': 4, 'skills': [{'skillId': s1, 'score': 2}]}), 201)
        # m2 has two awards left this minute (CONTRIBUTIONS_PER_MEMBER_PER_MINUTE: 600)
        self.r.cli('SET', '%s:awards:%s' % (ek, m2), '598', 'PX', '60000')
        key = 'same-%s' % uuid.uuid4().hex[:8]
        keyed = {'member': m0, 'title': 'Keyed', 'xp': 5, 'idempotencyKey': key,
                 'skills': [{'skillId': s1, 'score': 1}]}
        calls = [
            (self.path(owner, eid), {'member': m0, 'title': 'A',
                                     'skills': [{'skillId': s1, 'score': 2}]}),
            (self.path(admin, eid), {'member': m0, 'title': 'Unknown skill', 'xp': 50,
                                     'skills': [{'skillId': 's-' + str(uuid.uuid4()),
                                                 'score': 9}]}),
            (self.path(owner, eid), {'contributions': [
                {'member': m0, 'title': 'B0', 'xp': 0, 'skills': [{'skillId': s2, 'score': 3}]},
                {'member': m1, 'title': 'B1', 'skills': [{'skillId': s1, 'score': 1}]}]}),
            (self.path(owner, eid), keyed),
            (self.path(owner, eid), keyed),
        ] + [(self.path(admin, eid), {'member': m2, 'title': 'Rate %d' % i, 'xp': 1})
             for i in range(3)]
        got = self.answers(self.one_turn(calls))
        self.assertEqual(self.evalshas(), 2)  # the owner's group and the admin's
        self.assertEqual([s for s, _ in got[:3]], [201, 400, 201], got)
        self.assertEqual(got[1][1]['error']['field'], 'skills[0].skillId')
        self.assertEqual(sorted(s for s, _ in got[3:5]), [200, 201], got[3:5])
        self.assertEqual(got[3][1]['data'], got[4][1]['data'])
        self.assertEqual(sorted(s for s, _ in got[5:]), [201, 201, 429], got[5:])
        self.assertEqual(self.r.cli('GET', '%s:awards:%s' % (ek, m2)), b'600')
        ttl = int(self.r.cli('PTTL', '%s:awards:%s' % (ek, m2)))
        self.assertTrue(0 < ttl <= 60000, ttl)

        def prog(m):
            flat = self.r.cli('HGETALL', '%s:prog:%s' % (ek, m)) or []
            return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
        p0 = prog(m0)
        self.assertEqual((p0['xp'], p0['s:' + s1], p0['s:' + s2]), ('11', '5', '3'))
        self.assertIn('r:L1', p0)
        self.assertEqual(prog(m1), {'xp': '1', 's:' + s1: '1'})
        # each board lists each member once, with its final value
        for by, want in (('xp', {m0: 11, m1: 1, m2: 2}), (s1, {m0: 5, m1: 1}), (s2, {m0: 3})):
            board = ek + (':lb:xp' if by == 'xp' else ':lb:s:' + by)
            entries = sorted(e.decode() for e in self.r.cli('ZRANGE', board, 0, -1))
            self.assertEqual(entries, sorted('%016d:%s' % (9999999999999999 - v, m)
                                             for m, v in want.items()), by)
        reached = []
        for _id, f in self.r.cli('XRANGE', ek + ':events', '-', '+') or []:
            f = {f[i].decode(): f[i + 1].decode() for i in range(0, len(f), 2)}
            if f['type'] == 'level.reached':
                reached.append(json.loads(f['data']))
        self.assertEqual(reached, [{'member': m0, 'level': 'L1'}])
        records = self.check_invariants(eid, (s1, s2))
        self.assertEqual(sorted(c['title'] for c in records),
                         sorted(['A', 'B0', 'B1', 'Keyed', 'Seed'] +
                                [b['title'] for (_, b), (s, _) in zip(calls[5:], got[5:])
                                 if s == 201]))

    def test_clients_reset_while_their_grouped_answers_are_owed(self):
        eid, owner, admin, _, ms, (s1, s2) = self.setup_entity(CALLS)
        calls = [(self.path(owner, eid), {'member': m.address, 'title': 'Reset %d' % i,
                                          'skills': [{'skillId': s1, 'score': 1}]})
                 for i, m in enumerate(ms)]

        def reset_half(conns):
            for c in conns[::2]:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                c.close()  # RST with the request unanswered

        conns = self.one_turn(calls, reset_half)
        got = self.answers(conns[1::2])
        self.assertEqual([s for s, _ in got], [201] * len(got), got)
        self.assertTrue(self.svc.alive())
        # The reset requests were read before the reset reached the service, or not at all:
        # whichever, what was stored is whole.
        records = self.check_invariants(eid, (s1, s2))
        self.assertGreaterEqual(len(records), len(got))
        self.assertOk(self.req('GET', '/api/entities/%s?%s' % (eid, self.auth(owner))))

    def test_a_group_past_its_deadline_is_retried_once_by_its_keys(self):
        eid, owner, admin, _, ms, (s1, s2) = self.setup_entity(8)
        keys = ['late-%d-%s' % (i, uuid.uuid4().hex[:6]) for i in range(8)]
        bodies = [{'member': m.address, 'title': 'Late %d' % i, 'idempotencyKey': k,
                   'skills': [{'skillId': s2, 'score': 7}]}
                  for i, (m, k) in enumerate(zip(ms, keys))]
        calls = [(self.path(admin, eid), b) for b in bodies]
        # Redis holds back writes past REDIS_TIMEOUT_MS (1 s): the sign-in checks are read on
        # time, and the group's script waits behind the pause.
        def pause_writes(_conns):
            # held until the answers are read (well past the deadline however slow the machine)
            self.r.cli('CLIENT', 'PAUSE', '60000', 'WRITE')
            self.addCleanup(self.r.cli, 'CLIENT', 'UNPAUSE')

        got = self.answers(self.one_turn(calls, pause_writes))
        self.assertEqual([s for s, _ in got], [504] * len(calls), got)
        self.r.cli('CLIENT', 'UNPAUSE')
        # The late group ran after all: each retry with
        # its key replays the stored answer, and nothing is applied twice.
        harness.wait_for(lambda: self.r.cli('HLEN', 'ent:{%s}:contribs' % eid) == 8, scaled(5),
                         what='the late group applied')
        self.assertEqual(self.evalshas(), 1)
        for b in bodies:
            status, body = self.answers([self.retry(admin, eid, b)])[0]
            self.assertEqual((status, body.get('replayed')), (200, True), body)
        records = self.check_invariants(eid, (s1, s2))
        self.assertEqual(len(records), 8)

    def retry(self, w, eid, body):
        c = harness.RawConn(self.port, timeout=scaled(10))
        c.send(harness.http_request_bytes('POST', self.path(w, eid), {
            'Content-Type': 'application/json'}, json.dumps(body)))
        return c


if __name__ == '__main__':
    harness.main()
