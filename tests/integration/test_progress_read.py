"""Member progression, the read side (CONTRACT section 5): progress, contributions of a member,
leaderboards and the event feed. The keys are seeded straight into Redis in the shapes of
service/redis/keys.h (what the award and revoke scripts write), so these tests pin the reads
alone: levels reached or not against the current thresholds, endsAt, competition ranks,
cursor pages, roles."""

import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import fresh_address  # noqa: E402

NINES = 9999999999999999


def inv(value):
    return '%016d' % (NINES - value)


class Seed:
    """Writes progression keys as the write scripts do (keys.h)."""

    def __init__(self, redis, eid):
        self.r = redis
        self.p = 'ent:{%s}' % eid
        self.eid = eid

    def _move(self, board, addr, old, new):
        if old > 0:
            self.r.cli('ZREM', board, '%s:%s' % (inv(old), addr))
        if new > 0:
            self.r.cli('ZADD', board, '0', '%s:%s' % (inv(new), addr))

    def award(self, addr, xp=0, skills=None):
        prog = '%s:prog:%s' % (self.p, addr)
        if xp:
            old = int(self.r.cli('HGET', prog, 'xp') or 0)
            self.r.cli('HINCRBY', prog, 'xp', str(xp))
            self._move(self.p + ':lb:xp', addr, old, old + xp)
        for sid, score in (skills or {}).items():
            old = int(self.r.cli('HGET', prog, 's:' + sid) or 0)
            self.r.cli('HINCRBY', prog, 's:' + sid, str(score))
            self._move('%s:lb:s:%s' % (self.p, sid), addr, old, old + score)

    def reached(self, addr, lv, ms):
        self.r.cli('HSET', '%s:prog:%s' % (self.p, addr), 'r:' + lv, str(ms))

    def contribution(self, addr, created_ms, title, by):
        cid = 'k-' + str(uuid.uuid4())
        doc = {'id': cid, 'entityID': self.eid, 'member': addr, 'skills': [], 'xp': 1,
               'title': title, 'url': '', 'createdAt': harness.iso_ms(created_ms),
               'createdBy': by, 'revoked': False, 'revokedAt': None, 'revokedBy': None,
               'reason': None}
        self.r.cli('HSET', self.p + ':contribs', cid, json.dumps(doc, separators=(',', ':')))
        self.r.cli('ZADD', '%s:contribs:of:%s' % (self.p, addr), '0',
                   '%016d:%s' % (created_ms, cid))
        return cid

    def event(self, typ, actor, data):
        eid = self.r.cli('XADD', self.p + ':events', '*', 'type', typ,
                         'at', harness.iso_ms(int(time.time() * 1000)), 'actor', actor,
                         'data', json.dumps(data))
        return eid.decode() if isinstance(eid, bytes) else eid


class ProgressReadTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        names = ['owner', 'admin', 'm1', 'm2', 'm3', 'm4', 'm5', 'outsider', 'platform']
        cls.w = dict(zip(names, harness.Wallet.random(len(names))))
        cls.svc = cls.class_entityd(redis=cls.r, env={
            'PLATFORM_ADMINS': cls.w['platform'].address})
        cls.port = cls.svc.port
        msg, _ = harness.current_message(cls.port)
        cls.sig = {n: w.sign(msg)[1] for n, w in cls.w.items()}
        cls.addr = {n: w.address.lower() for n, w in cls.w.items()}

    # --- helpers ---

    def call(self, who, method, path, body=None):
        if who is not None:
            path += ('&' if '?' in path else '?') + 'address=%s&signature=%s' % (
                self.w[who].address, self.sig[who])
        return harness.request(self.port, method, path, body=body)

    def ok(self, who, path, status=200):
        return self.assertOk(self.call(who, 'GET', path), status)

    def entity(self, public=True, members=('m1', 'm2', 'm3', 'm4')):
        body = {'name': 'Guild', 'description': '', 'ownerAddresses': [self.w['owner'].address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'public': public}
        b = self.assertOk(self.call('owner', 'POST', '/api/entities', body), 201)
        eid = b['data']['id']
        self.assertOk(self.call('owner', 'POST', '/api/entities/%s/admins' % eid,
                                {'addresses': [self.w['admin'].address]}))
        self.assertOk(self.call('owner', 'POST', '/api/entities/%s/force-add' % eid, {
            'addresses': [self.w[m].address for m in members], 'Chain': 'eth'}))
        return eid, Seed(self.r, eid)

    def skills(self, eid, *names):
        b = self.assertOk(self.call('owner', 'POST', '/api/skills/multiple',
                                    {'names': list(names), 'entityID': eid}), 201)
        return [s['id'] for s in b['data']]

    def level(self, eid, lv, xp, skills=(), scores=(), ends_at=None):
        body = {'name': 'Level ' + lv, 'skillIds': list(skills), 'scores': list(scores),
                'XP': xp}
        if ends_at is not None:
            body['endsAt'] = ends_at
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/levels/%s/update' % (eid, lv),
                             body)
        self.assertIn(st, (200, 201), b)

    def progress(self, who, eid, member):
        return self.ok(who, '/api/entities/%s/members/%s/progress' % (eid, self.addr[member]))

    # --- progress ---

    def test_progress_levels_reached_and_missing(self):
        eid, seed = self.entity()
        a, b = self.skills(eid, 'Rust', 'Design')
        self.level(eid, 'one', 10, [a], [3])
        self.level(eid, 'two', 100, [a, b], [3, 2])
        self.level(eid, 'zero', 0, [b], [1])
        self.level(eid, 'also10', 10, [], [])
        seed.award(self.addr['m1'], xp=50, skills={a: 5})
        seed.reached(self.addr['m1'], 'one', 1700000000123)
        d = self.progress('m1', eid, 'm1')['data']
        self.assertEqual(d['member'], self.addr['m1'])
        self.assertEqual(d['xp'], 50)
        self.assertEqual(d['rank'], 1)
        self.assertEqual(d['skills'], [{'skillId': a, 'name': 'Rust', 'score': 5, 'total': 5}])
        self.assertEqual([lv['id'] for lv in d['levels']], ['zero', 'also10', 'one', 'two'])
        by = {lv['id']: lv for lv in d['levels']}
        self.assertEqual(by['zero'], {'id': 'zero', 'name': 'Level zero', 'XP': 0,
                                      'requires': [], 'reached': False, 'unlocked': True,
                                      'reachedAt': None,
                                      'missing': {'xp': 0, 'skills': [
                                          {'skillId': b, 'need': 1, 'have': 0}],
                                          'levels': []}})
        self.assertEqual(by['one']['reached'], True)
        self.assertEqual(by['one']['reachedAt'], '2023-11-14T22:13:20.123Z')
        self.assertEqual(by['one']['missing'], {'xp': 0, 'skills': [], 'levels': []})
        self.assertEqual(by['also10']['reached'], True)
        self.assertEqual(by['two']['reached'], False)
        self.assertEqual(by['two']['missing'],
                         {'xp': 50, 'skills': [{'skillId': b, 'need': 2, 'have': 0}],
                          'levels': []})
        self.assertEqual(d['level'], 'one')
        # Nothing awarded: XP 0, rank null, no level.
        d = self.progress('owner', eid, 'm2')['data']
        self.assertEqual((d['xp'], d['rank'], d['skills'], d['level']), (0, None, [], None))
        self.assertEqual([lv['reached'] for lv in d['levels']], [False, False, False, False])

    def test_threshold_raised_and_lowered_flips_reached(self):
        eid, seed = self.entity()
        (a,) = self.skills(eid, 'Solidity')
        self.level(eid, 'lv', 40, [a], [4])
        seed.award(self.addr['m1'], xp=50, skills={a: 5})
        lv = self.progress('m1', eid, 'm1')['data']['levels'][0]
        self.assertTrue(lv['reached'])
        self.level(eid, 'lv', 60, [a], [4])
        d = self.progress('m1', eid, 'm1')['data']
        self.assertEqual((d['levels'][0]['reached'], d['levels'][0]['missing']['xp'], d['level']),
                         (False, 10, None))
        self.level(eid, 'lv', 40, [a], [6])
        lv = self.progress('m1', eid, 'm1')['data']['levels'][0]
        self.assertEqual((lv['reached'], lv['missing']['skills']),
                         (False, [{'skillId': a, 'need': 6, 'have': 5}]))
        self.level(eid, 'lv', 50, [a], [5])
        lv = self.progress('m1', eid, 'm1')['data']['levels'][0]
        self.assertEqual((lv['reached'], lv['missing']),
                         (True, {'xp': 0, 'skills': [], 'levels': []}))

    def test_ends_at_in_the_past(self):
        eid, seed = self.entity()
        ends = '2024-01-01T00:00:00.000Z'
        ends_ms = 1704067200000
        self.level(eid, 'gone', 10, ends_at=ends)
        self.level(eid, 'open', 10, ends_at='2999-01-01T00:00:00.000Z')
        for m in ('m1', 'm2', 'm3'):
            seed.award(self.addr[m], xp=20)
        seed.reached(self.addr['m2'], 'gone', ends_ms - 1)
        seed.reached(self.addr['m3'], 'gone', ends_ms)
        want = {'m1': (False, None), 'm2': (True, '2023-12-31T23:59:59.999Z'),
                'm3': (False, '2024-01-01T00:00:00.000Z')}
        for m, (reached, at) in want.items():
            d = self.progress('owner', eid, m)['data']
            gone, still = d['levels'][0], d['levels'][1]
            self.assertEqual(gone['id'], 'gone')
            self.assertEqual((gone['reached'], gone['reachedAt']), (reached, at), m)
            self.assertTrue(still['reached'], m)  # endsAt ahead: the current rule alone
        # A revocation leaves reachedAt; reached follows the rule.
        seed.award(self.addr['m2'], xp=-15)
        gone = self.progress('owner', eid, 'm2')['data']['levels'][0]
        self.assertEqual((gone['reached'], gone['reachedAt']),
                         (False, '2023-12-31T23:59:59.999Z'))

    def test_competition_ranks(self):
        eid, seed = self.entity()
        for m, xp in (('m1', 30), ('m2', 20), ('m3', 20), ('m4', 10)):
            seed.award(self.addr[m], xp=xp)
        ranks = {m: self.progress('m1', eid, m)['data']['rank'] for m in ('m1', 'm2', 'm3', 'm4')}
        self.assertEqual(ranks, {'m1': 1, 'm2': 2, 'm3': 2, 'm4': 4})
        b = self.ok('m4', '/api/entities/%s/leaderboard' % eid)
        tie = sorted([self.addr['m2'], self.addr['m3']])
        self.assertEqual(b['data'], [
            {'rank': 1, 'member': self.addr['m1'], 'value': 30},
            {'rank': 2, 'member': tie[0], 'value': 20},
            {'rank': 2, 'member': tie[1], 'value': 20},
            {'rank': 4, 'member': self.addr['m4'], 'value': 10}])
        self.assertIsNone(b['nextCursor'])
        self.assertEqual(self.ok('m4', '/api/entities/%s/leaderboard?by=xp' % eid)['data'],
                         b['data'])

    # --- leaderboard ---

    def test_leaderboard_pages(self):
        eid, seed = self.entity()
        values = [50, 40, 40, 40, 30, 20, 10]
        people = [fresh_address() for _ in values]
        for a, v in zip(people, values):
            seed.award(a, xp=v)
        expect = sorted(zip(values, people), key=lambda t: (-t[0], t[1]))
        ranks = [1, 2, 2, 2, 5, 6, 7]
        seen, cursor, pages = [], None, 0
        while pages < 10:
            q = '/api/entities/%s/leaderboard?limit=2' % eid
            if cursor:
                q += '&cursor=' + cursor
            b = self.ok('outsider', q)
            seen += b['data']
            pages += 1
            cursor = b['nextCursor']
            if cursor is None:
                break
            self.assertRegex(cursor, '^[0-9]{16}[0-9a-f]{40}$')
        self.assertEqual(pages, 4)
        self.assertEqual(seen, [{'rank': r, 'member': a, 'value': v}
                                for r, (v, a) in zip(ranks, expect)])
        # Between pages: a member already listed whose value grows is not listed again, and
        # one not yet listed whose value is unchanged is not skipped.
        b = self.ok('outsider', '/api/entities/%s/leaderboard?limit=3' % eid)
        first = [e['member'] for e in b['data']]
        seed.award(first[2], xp=100)
        b = self.ok('outsider', '/api/entities/%s/leaderboard?limit=10&cursor=%s' %
                    (eid, b['nextCursor']))
        self.assertEqual([e['member'] for e in b['data']], [a for _, a in expect[3:]])
        self.assertEqual(b['data'][0]['rank'], 3)  # 150 now leads; two 40s remain above
        # Limits and cursors.
        for bad in ('0', '101', 'x', ''):
            self.assertEnvelope(self.call('m1', 'GET', '/api/entities/%s/leaderboard?limit=%s' %
                                          (eid, bad)), 400, 'invalid_request', 'limit')
        self.assertEnvelope(self.call('m1', 'GET', '/api/entities/%s/leaderboard?cursor=zz' %
                                      eid), 400, 'invalid_request', 'cursor')
        # A cursor is the entry the page ended with: its 16 digits and the address's hex. The
        # hex of the whole entry, as earlier releases issued it, continues the same page.
        b = self.ok('m1', '/api/entities/%s/leaderboard?limit=2' % eid)
        c = b['nextCursor']
        entry = ('%s:0x%s' % (c[:16], c[16:])).encode()
        whole = self.ok('m1', '/api/entities/%s/leaderboard?limit=4' % eid)['data']
        for cur in (c, entry.hex(), entry.hex().upper()):
            page = self.ok('m1', '/api/entities/%s/leaderboard?limit=2&cursor=%s' % (eid, cur))
            self.assertEqual(page['data'], whole[2:4], cur)
        for bad in (c[:55], c + '0', c[:16] + c[16:].upper(), 'x' + c[1:], c[:15] + ':' + c[16:],
                    entry.hex()[:-2], entry.hex().replace('3a', '3b', 1)):
            self.assertEnvelope(self.call('m1', 'GET', '/api/entities/%s/leaderboard?cursor=%s' %
                                          (eid, bad)), 400, 'invalid_request', 'cursor')
        self.assertEqual(len(self.ok('m1', '/api/entities/%s/leaderboard?limit=100' %
                                     eid)['data']), 7)

    def test_leaderboard_by_skill(self):
        eid, seed = self.entity(public=False)
        a, b = self.skills(eid, 'Go', 'C')
        seed.award(self.addr['m1'], xp=5, skills={a: 3})
        seed.award(self.addr['m2'], xp=50, skills={a: 7, b: 1})
        d = self.ok('m1', '/api/entities/%s/leaderboard?by=%s' % (eid, a))['data']
        self.assertEqual(d, [{'rank': 1, 'member': self.addr['m2'], 'value': 7},
                             {'rank': 2, 'member': self.addr['m1'], 'value': 3}])
        self.assertEqual(self.ok('m1', '/api/entities/%s/leaderboard?by=%s' % (eid, b))['data'],
                         [{'rank': 1, 'member': self.addr['m2'], 'value': 1}])
        unknown = 's-' + str(uuid.uuid4())
        for by in (unknown, 'XP', 'c-' + str(uuid.uuid4()), 's-nope'):
            self.assertEnvelope(self.call('m1', 'GET', '/api/entities/%s/leaderboard?by=%s' %
                                          (eid, by)), 400, 'invalid_request', 'by')
        # Skills existence is not told to a caller who may not read the entity.
        self.assertEnvelope(self.call('outsider', 'GET', '/api/entities/%s/leaderboard?by=%s' %
                                      (eid, unknown)), 403, 'forbidden')
        self.assertEnvelope(self.call('platform', 'GET', '/api/entities/%s/leaderboard?by=%s' %
                                      (eid, unknown)), 400, 'invalid_request', 'by')

    # --- roles ---

    def test_roles(self):
        eid, seed = self.entity(public=False)
        seed.award(self.addr['m1'], xp=5)
        # An address with progress that is not (or no longer) in the members hash: only the
        # member themself (and the roles of the read rule) may look.
        seed.award(self.addr['outsider'], xp=7)
        paths = ['/api/entities/%s/members/%s/progress', '/api/entities/%s/members/%s/contributions']
        for p in paths:
            for who, member, want in (('owner', 'm1', 200), ('admin', 'm1', 200),
                                      ('m2', 'm1', 200), ('m1', 'm1', 200),
                                      ('platform', 'm1', 200), ('outsider', 'm1', 403),
                                      ('outsider', 'outsider', 200), ('m5', 'outsider', 403)):
                st, _, b = self.call(who, 'GET', p % (eid, self.addr[member]))
                self.assertEqual(st, want, (p, who, member, b))
            # Without a signature: 401; a bad address or entity id in the path: 404.
            st, _, _ = harness.request(self.port, 'GET', p % (eid, self.addr['m1']) +
                                       '?address=' + self.addr['m1'])
            self.assertEqual(st, 401)
            self.assertEnvelope(self.call('owner', 'GET', p % (eid, '0x1234')), 404, 'not_found')
            self.assertEnvelope(self.call('owner', 'GET', p % ('c-nope', self.addr['m1'])), 404,
                                'not_found')
            # Not a member and nothing recorded: 404.
            self.assertEnvelope(self.call('owner', 'GET', p % (eid, fresh_address())), 404,
                                'not_found')
            self.assertEnvelope(self.call('owner', 'GET', p % ('c-' + str(uuid.uuid4()),
                                                              self.addr['m1'])), 404, 'not_found')
        self.assertEnvelope(self.call('outsider', 'GET', '/api/entities/%s/leaderboard' % eid),
                            403, 'forbidden')
        self.assertOk(self.call('m2', 'GET', '/api/entities/%s/leaderboard' % eid))
        # A mixed-case address must pass EIP-55; its checksummed form is the member.
        st, _, b = self.call('m1', 'GET', '/api/entities/%s/members/%s/progress' %
                             (eid, harness.eip55(self.addr['m1'])))
        self.assertEqual((st, b['data']['member']), (200, self.addr['m1']))

    def test_disabled_entity(self):
        eid, seed = self.entity()
        seed.award(self.addr['m1'], xp=5)
        body = {'name': 'Guild', 'description': '', 'ownerAddresses': [self.w['owner'].address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'id': eid,
                'isEnabled': False}
        self.assertOk(self.call('platform', 'POST', '/api/entities', body))
        for p in ('/members/%s/progress' % self.addr['m1'], '/leaderboard', '/events',
                  '/members/%s/contributions' % self.addr['m1']):
            for who, want in (('owner', 200), ('platform', 200), ('admin', 404), ('m1', 404),
                              ('outsider', 404)):
                st, _, b = self.call(who, 'GET', '/api/entities/%s%s' % (eid, p))
                self.assertEqual(st, want, (p, who, b))

    # --- contributions ---

    def test_contributions_newest_first_in_pages(self):
        eid, seed = self.entity()
        base = 1760000000000
        ids = [seed.contribution(self.addr['m1'], base + i * 1000, 'c%d' % i, self.addr['owner'])
               for i in range(5)]
        seed.contribution(self.addr['m2'], base, 'other', self.addr['owner'])
        seen, cursor, pages = [], None, 0
        while pages < 10:
            q = '/api/entities/%s/members/%s/contributions?limit=2' % (eid, self.addr['m1'])
            if cursor:
                q += '&cursor=' + cursor
            b = self.ok('m3', q)
            seen += b['data']
            pages += 1
            cursor = b['nextCursor']
            if not cursor:
                break
        self.assertEqual(pages, 3)
        self.assertEqual([c['id'] for c in seen], ids[::-1])
        self.assertEqual(seen[0]['title'], 'c4')
        self.assertEqual(seen[0]['revoked'], False)
        b = self.ok('m3', '/api/entities/%s/members/%s/contributions' % (eid, self.addr['m1']))
        self.assertEqual((len(b['data']), b['nextCursor']), (5, None))
        b = self.ok('m3', '/api/entities/%s/members/%s/contributions' % (eid, self.addr['m4']))
        self.assertEqual(b, {'success': True, 'data': [], 'nextCursor': None})
        for bad in ('0', '101'):
            self.assertEnvelope(self.call('m1', 'GET', '/api/entities/%s/members/%s/'
                                          'contributions?limit=%s' % (eid, self.addr['m1'], bad)),
                                400, 'invalid_request', 'limit')
        self.assertEnvelope(self.call('m1', 'GET', '/api/entities/%s/members/%s/'
                                      'contributions?cursor=%s' % (eid, self.addr['m1'], 'ab' * 55)),
                            400, 'invalid_request', 'cursor')

    # --- events ---

    def test_events(self):
        eid, seed = self.entity(public=False)
        # Only the seeded events: the ones the set-up's own writes recorded are dropped.
        seed.r.cli('DEL', seed.p + ':events')
        ids = [seed.event('contribution.added', self.addr['owner'], {'id': 'k-%d' % i, 'xp': i})
               for i in range(5)]
        path = '/api/entities/%s/events' % eid
        for who, want in (('owner', 200), ('admin', 200), ('platform', 200), ('m1', 403),
                          ('outsider', 403)):
            st, _, b = self.call(who, 'GET', path)
            self.assertEqual(st, want, (who, b))
            if want == 403:
                self.assertEqual(b['error']['code'], 'forbidden')
        b = self.ok('admin', path)
        self.assertEqual([e['id'] for e in b['data']], ids)
        self.assertIsNone(b['nextCursor'])
        first = b['data'][0]
        self.assertEqual(set(first), {'id', 'type', 'at', 'actor', 'data'})
        self.assertEqual((first['type'], first['actor'], first['data']),
                         ('contribution.added', self.addr['owner'], {'id': 'k-0', 'xp': 0}))
        b = self.ok('owner', path + '?limit=2')
        self.assertEqual(([e['id'] for e in b['data']], b['nextCursor']), (ids[:2], ids[1]))
        b = self.ok('owner', path + '?limit=2&after=' + b['nextCursor'])
        self.assertEqual(([e['id'] for e in b['data']], b['nextCursor']), (ids[2:4], ids[3]))
        b = self.ok('owner', path + '?limit=2&after=' + b['nextCursor'])
        self.assertEqual(([e['id'] for e in b['data']], b['nextCursor']), (ids[4:], None))
        b = self.ok('owner', path + '?after=' + ids[4])
        self.assertEqual(b['data'], [])
        b = self.ok('owner', path + '?after=0-0')
        self.assertEqual(len(b['data']), 5)
        b = self.ok('owner', path + '?after=18446744073709551615-18446744073709551615')
        self.assertEqual(b['data'], [])
        self.assertEqual(len(self.ok('owner', path + '?after=')['data']), 5)
        for bad in ('x', '12', '1-', '-1', '1-2-3', '18446744073709551616-0', '0x1-2'):
            self.assertEnvelope(self.call('owner', 'GET', path + '?after=' + bad), 400,
                                'invalid_request', 'after')
        for bad in ('0', '1001'):
            self.assertEnvelope(self.call('owner', 'GET', path + '?limit=' + bad), 400,
                                'invalid_request', 'limit')
        seed.event('member.added', '', {'addresses': [self.addr['m5']], 'chain': 'eth'})
        b = self.ok('owner', path + '?after=' + ids[4])
        self.assertEqual(b['data'][0]['actor'], None)
        self.assertEqual(b['data'][0]['data'], {'addresses': [self.addr['m5']], 'chain': 'eth'})


if __name__ == '__main__':
    harness.main()
