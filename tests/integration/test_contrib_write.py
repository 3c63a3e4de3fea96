"""Member progression, the write side (CONTRACT section 5): awards (one and batches), their
validation fields, progress and leaderboard keys, idempotency, concurrency, revocation, and the
events every write script records in the same script as its change."""

import json
import os
import re
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402

CONTRIB_ID = re.compile(r'^k-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')
ISO_MS = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$')
FIELDS = ['id', 'entityID', 'member', 'skills', 'xp', 'title', 'url', 'createdAt', 'createdBy',
          'revoked', 'revokedAt', 'revokedBy', 'reason']
WALLETS = 60


def inv(v):
    return '%016d' % (9999999999999999 - v)


class ContribWriteTest(harness.ServiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.platform = cls.pool.pop()
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env={'PLATFORM_ADMINS': cls.platform.address,
                                                      'EVENTS_MAX': '100'})
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])

    # ---- helpers ----

    def wallets(self, n):
        return [self.pool.pop() for _ in range(n)]

    def auth(self, w):
        return self.signer.query(w)

    def req(self, method, path, body=None):
        return harness.request(self.port, method, path, body=body, timeout=scaled(10))

    def setup_entity(self, members=2, skills=2):
        owner, admin, stranger = self.wallets(3)
        ms = self.wallets(members)
        body = {'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
                'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
                'imageUrl': '', 'public': True}
        eid = self.assertOk(self.req('POST', '/api/entities?' + self.auth(owner), body),
                            201)['data']['id']
        self.assertOk(self.req('POST', '/api/entities/%s/admins?%s' % (eid, self.auth(owner)),
                               {'addresses': [admin.address]}))
        self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(owner)),
                               {'addresses': [m.address for m in ms], 'Chain': 'eth'}))
        sids = []
        if skills:
            out = self.assertOk(self.req('POST', '/api/skills/multiple?' + self.auth(owner), {
                'entityID': eid, 'names': ['Skill %d' % i for i in range(skills)]}), 201)
            sids = [s['id'] for s in out['data']]
        return eid, owner, admin, stranger, ms, sids

    def award(self, w, eid, body):
        return self.req('POST', '/api/entities/%s/contributions?%s' % (eid, self.auth(w)), body)

    def revoke(self, w, eid, cid, body):
        return self.req('POST', '/api/entities/%s/contributions/%s/revoke?%s' %
                        (eid, cid, self.auth(w)), body)

    def prog(self, eid, addr):
        flat = self.r.cli('HGETALL', 'ent:{%s}:prog:%s' % (eid, addr)) or []
        return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}

    def lb(self, eid, by='xp'):
        key = 'ent:{%s}:lb:%s' % (eid, 'xp' if by == 'xp' else 's:' + by)
        return [m.decode() for m in self.r.cli('ZRANGE', key, 0, -1) or []]

    def events(self, eid):
        out = []
        for _id, fields in self.r.cli('XRANGE', 'ent:{%s}:events' % eid, '-', '+') or []:
            f = {fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)}
            f['data'] = json.loads(f['data'])
            out.append(f)
        return out

    # ---- tests ----

    def test_award_one(self):
        eid, owner, admin, _, (m1, m2), (s1, s2) = self.setup_entity()
        body = self.assertOk(self.award(admin, eid, {
            'member': m1.address.upper().replace('0X', '0x'), 'title': '  Fixed a bug ',
            'skills': [{'skillId': s1, 'score': 5}, {'skillId': s2, 'score': 3}],
            'url': 'https://example.org/pr/1'}), 201)
        c = body['data']
        self.assertEqual(list(c), FIELDS)
        self.assertRegex(c['id'], CONTRIB_ID)
        self.assertRegex(c['createdAt'], ISO_MS)
        self.assertEqual((c['entityID'], c['member'], c['xp'], c['title'], c['url']),
                         (eid, m1.address.lower(), 8, 'Fixed a bug', 'https://example.org/pr/1'))
        self.assertEqual(c['skills'], [{'skillId': s1, 'score': 5}, {'skillId': s2, 'score': 3}])
        self.assertEqual(c['createdBy'], admin.address.lower())
        self.assertEqual((c['revoked'], c['revokedAt'], c['revokedBy'], c['reason']),
                         (False, None, None, None))
        self.assertNotIn('replayed', body)
        a = m1.address.lower()
        self.assertEqual(self.prog(eid, a), {'xp': '8', 's:' + s1: '5', 's:' + s2: '3'})
        self.assertEqual(self.lb(eid), [inv(8) + ':' + a])
        self.assertEqual(self.lb(eid, s1), [inv(5) + ':' + a])
        stored = self.r.cli('HGET', 'ent:{%s}:contribs' % eid, c['id']).decode()
        self.assertEqual(json.loads(stored), c)
        of = [x.decode() for x in self.r.cli('ZRANGE', 'ent:{%s}:contribs:of:%s' % (eid, a), 0, -1)]
        self.assertEqual(len(of), 1)
        self.assertTrue(of[0].endswith(':' + c['id']) and len(of[0].split(':')[0]) == 16, of)
        # xp given explicitly, no skills, no url; an owner awards.
        c2 = self.assertOk(self.award(owner, eid, {'member': a, 'xp': 100, 'title': 'Talk'}),
                           201)['data']
        self.assertEqual((c2['xp'], c2['skills'], c2['url']), (100, [], None))
        self.assertEqual(self.prog(eid, a)['xp'], '108')
        # skills with xp 0: only scores move
        self.assertOk(self.award(owner, eid, {'member': m2.address, 'xp': 0, 'title': 'T',
                                              'skills': [{'skillId': s2, 'score': 7}]}), 201)
        self.assertEqual(self.prog(eid, m2.address.lower()), {'s:' + s2: '7'})
        self.assertEqual(self.lb(eid, s2), [inv(7) + ':' + m2.address.lower(),
                                            inv(3) + ':' + a])
        ev = [e for e in self.events(eid) if e['type'] == 'contribution.added']
        self.assertEqual(len(ev), 3)
        self.assertEqual(ev[0]['data'], {'id': c['id'], 'member': a, 'xp': 8,
                                         'skills': c['skills']})
        self.assertEqual(ev[0]['actor'], admin.address.lower())
        self.assertRegex(ev[0]['at'], ISO_MS)

    def test_validation(self):
        eid, owner, _, stranger, (m1, _m2), (s1, _s2) = self.setup_entity()
        a = m1.address
        ok = {'member': a, 'title': 't', 'xp': 1}
        cases = [
            ({'title': 't', 'xp': 1}, 'member'),
            (dict(ok, member='0x12'), 'member'),
            (dict(ok, member=stranger.address), 'member'),
            (dict(ok, xp=-1), 'xp'),
            (dict(ok, xp=1000000001), 'xp'),
            (dict(ok, xp='5'), 'xp'),
            (dict(ok, xp=0), 'xp'),
            ({'member': a, 'title': 't'}, 'xp'),
            (dict(ok, title=''), 'title'),
            (dict(ok, title='   '), 'title'),
            (dict(ok, title='x' * 201), 'title'),
            ({'member': a, 'xp': 1}, 'title'),
            (dict(ok, url='ftp://x'), 'url'),
            (dict(ok, url='https://e.org/' + 'a' * 2040), 'url'),
            (dict(ok, idempotencyKey=''), 'idempotencyKey'),
            (dict(ok, idempotencyKey='a b'), 'idempotencyKey'),
            (dict(ok, idempotencyKey='k' * 65), 'idempotencyKey'),
            (dict(ok, skills={}), 'skills'),
            (dict(ok, skills=[{'skillId': 'x', 'score': 1}]), 'skills[0].skillId'),
            (dict(ok, skills=[{'skillId': s1, 'score': 0}]), 'skills[0].score'),
            (dict(ok, skills=[{'skillId': s1, 'score': 1000001}]), 'skills[0].score'),
            (dict(ok, skills=[{'skillId': s1, 'score': 1}, {'skillId': s1, 'score': 2}]),
             'skills[1].skillId'),
            (dict(ok, skills=[{'skillId': s1, 'score': 1},
                              {'skillId': 's-' + str(uuid.uuid4()), 'score': 2}]),
             'skills[1].skillId'),
            (dict(ok, skills=[{'skillId': 's-' + str(uuid.uuid4()), 'score': 1}] * 33), 'skills'),
            ({'contributions': []}, 'contributions'),
            ({'contributions': [ok] * 101}, 'contributions'),
            ({'contributions': [ok, 5]}, 'contributions[1]'),
            ({'contributions': [ok, dict(ok, xp=-1)]}, 'contributions[1].xp'),
            ({'contributions': [ok, dict(ok, idempotencyKey='k')]},
             'contributions[1].idempotencyKey'),
            ({'contributions': [ok, dict(ok, member=stranger.address)]},
             'contributions[1].member'),
            ({'contributions': [ok, dict(ok, skills=[{'skillId': 's-' + str(uuid.uuid4()),
                                                      'score': 1}])]},
             'contributions[1].skills[0].skillId'),
        ]
        for body, field in cases:
            with self.subTest(field=field, body=str(body)[:120]):
                self.assertEnvelope(self.award(owner, eid, body), 400, 'invalid_request', field)
        self.assertEqual(self.r.cli('HLEN', 'ent:{%s}:contribs' % eid), 0)
        self.assertEqual(self.prog(eid, a.lower()), {})
        # Roles and ids.
        self.assertEnvelope(self.award(stranger, eid, ok), 403, 'forbidden')
        self.assertEnvelope(self.award(m1, eid, ok), 403, 'forbidden')
        self.assertEnvelope(self.award(owner, 'c-' + str(uuid.uuid4()), ok), 404, 'not_found')
        self.assertEnvelope(self.award(owner, 'nope', ok), 404, 'not_found')
        self.assertOk(self.award(self.platform, eid, ok), 201)

    def test_batch_all_or_nothing(self):
        eid, owner, _, stranger, (m1, m2), (s1, _s2) = self.setup_entity()
        items = [{'member': m1.address, 'title': 'a', 'xp': 5},
                 {'member': m2.address, 'title': 'b', 'skills': [{'skillId': s1, 'score': 2}]}]
        self.assertEnvelope(self.award(owner, eid, {'contributions': items + [
            {'member': stranger.address, 'title': 'c', 'xp': 1}]}), 400, 'invalid_request',
            'contributions[2].member')
        self.assertEqual(self.r.cli('HLEN', 'ent:{%s}:contribs' % eid), 0)
        self.assertEqual(self.lb(eid), [])
        self.assertEqual([e for e in self.events(eid) if e['type'] == 'contribution.added'], [])
        body = self.assertOk(self.award(owner, eid, {'contributions': items}), 201)
        self.assertEqual([c['member'] for c in body['data']],
                         [m1.address.lower(), m2.address.lower()])
        self.assertEqual([c['xp'] for c in body['data']], [5, 2])
        self.assertEqual(self.r.cli('HLEN', 'ent:{%s}:contribs' % eid), 2)

    def test_parallel_awards(self):
        eid, owner, _, _, (m1, _m2), (s1, _s2) = self.setup_entity()
        results = []

        def one():
            results.append(self.award(owner, eid, {'member': m1.address, 'title': 'p',
                                                   'skills': [{'skillId': s1, 'score': 1}]})[0])

        threads = [threading.Thread(target=one) for _ in range(100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(scaled(60))
        self.assertEqual(results, [201] * 100)
        p = self.prog(eid, m1.address.lower())
        self.assertEqual((p['xp'], p['s:' + s1]), ('100', '100'))
        self.assertEqual(self.lb(eid), [inv(100) + ':' + m1.address.lower()])

    def test_idempotency(self):
        eid, owner, admin, _, (m1, m2), _ = self.setup_entity()
        body = {'member': m1.address, 'title': 'once', 'xp': 10, 'idempotencyKey': 'key-1'}
        first = self.assertOk(self.award(owner, eid, body), 201)
        again = self.assertOk(self.award(admin, eid, body), 200)
        self.assertIs(again.get('replayed'), True)
        self.assertEqual(again['data'], first['data'])
        self.assertEqual(self.prog(eid, m1.address.lower())['xp'], '10')
        self.assertEqual(self.r.cli('HLEN', 'ent:{%s}:contribs' % eid), 1)
        ttl = self.r.cli('TTL', 'ent:{%s}:idem:key-1' % eid)
        self.assertTrue(86000 < ttl <= 86400, ttl)
        self.assertEnvelope(self.award(owner, eid, dict(body, xp=11)), 409, 'conflict')
        self.assertEnvelope(self.award(owner, eid, {
            'contributions': [{'member': m1.address, 'title': 'once', 'xp': 10}],
            'idempotencyKey': 'key-1'}), 409, 'conflict')
        # The same key in another entity is another key.
        eid2, owner2, _, _, (n1, _), _ = self.setup_entity(skills=0)
        self.assertOk(self.award(owner2, eid2, dict(body, member=n1.address)), 201)
        # A batch with its key: replayed as a whole.
        batch = {'contributions': [{'member': m1.address, 'title': 'b', 'xp': 1},
                                   {'member': m2.address, 'title': 'b', 'xp': 2}],
                 'idempotencyKey': 'batch_1'}
        b1 = self.assertOk(self.award(owner, eid, batch), 201)
        b2 = self.assertOk(self.award(owner, eid, batch), 200)
        self.assertEqual((b2['data'], b2['replayed']), (b1['data'], True))
        self.assertEqual(self.prog(eid, m2.address.lower())['xp'], '2')
        n = len([e for e in self.events(eid) if e['type'] == 'contribution.added'])
        self.assertEqual(n, 3)

    def test_revoke(self):
        eid, owner, admin, stranger, (m1, m2), (s1, s2) = self.setup_entity()
        a = m1.address.lower()
        c = self.assertOk(self.award(owner, eid, {
            'member': a, 'title': 'r', 'skills': [{'skillId': s1, 'score': 4}]}), 201)['data']
        self.assertOk(self.award(owner, eid, {'member': a, 'title': 'keep', 'xp': 1}), 201)
        self.assertEnvelope(self.revoke(admin, eid, c['id'], {}), 400, 'invalid_request',
                            'reason')
        self.assertEnvelope(self.revoke(admin, eid, c['id'], {'reason': ' '}), 400,
                            'invalid_request', 'reason')
        self.assertEnvelope(self.revoke(admin, eid, c['id'], {'reason': 'x' * 501}), 400,
                            'invalid_request', 'reason')
        self.assertEnvelope(self.revoke(stranger, eid, c['id'], {'reason': 'no'}), 403,
                            'forbidden')
        self.assertEnvelope(self.revoke(admin, eid, 'k-' + str(uuid.uuid4()), {'reason': 'x'}),
                            404, 'not_found')
        self.assertEnvelope(self.revoke(admin, eid, 'bad', {'reason': 'x'}), 404, 'not_found')
        r1 = self.assertOk(self.revoke(admin, eid, c['id'], {'reason': 'spam'}))['data']
        self.assertEqual(list(r1), FIELDS)
        self.assertEqual((r1['revoked'], r1['revokedBy'], r1['reason']),
                         (True, admin.address.lower(), 'spam'))
        self.assertRegex(r1['revokedAt'], ISO_MS)
        self.assertEqual({k: r1[k] for k in FIELDS[:9]}, {k: c[k] for k in FIELDS[:9]})
        self.assertEqual(self.prog(eid, a), {'xp': '1', 's:' + s1: '0'})
        self.assertEqual(self.lb(eid), [inv(1) + ':' + a])
        self.assertEqual(self.lb(eid, s1), [])
        r2 = self.assertOk(self.revoke(owner, eid, c['id'], {'reason': 'again'}))['data']
        self.assertEqual(r2, r1)
        self.assertEqual(self.prog(eid, a), {'xp': '1', 's:' + s1: '0'})
        ev = [e for e in self.events(eid) if e['type'] == 'contribution.revoked']
        self.assertEqual([e['data'] for e in ev], [{'id': c['id'], 'member': a, 'reason': 'spam'}])

    def test_levels_reached(self):
        eid, owner, _, _, (m1, _m2), (s1, _s2) = self.setup_entity()
        a = m1.address.lower()

        def level(lv, xp, ids=(), scores=(), ends=None):
            body = {'name': lv, 'XP': xp, 'skillIds': list(ids), 'scores': list(scores)}
            if ends:
                body['endsAt'] = ends
            self.assertOk(self.req('POST', '/api/entities/%s/levels/%s/update?%s' %
                                   (eid, lv, self.auth(owner)), body), 201)

        level('l1', 5)
        level('l2', 5, [s1], [3])
        level('l3', 50)
        level('gone', 1, ends='2001-01-01T00:00:00.000Z')
        self.assertOk(self.award(owner, eid, {'member': a, 'title': 'x', 'xp': 5}), 201)
        p = self.prog(eid, a)
        self.assertIn('r:l1', p)
        self.assertNotIn('r:l2', p)
        self.assertNotIn('r:gone', p)
        self.assertOk(self.award(owner, eid, {'member': a, 'title': 'y', 'xp': 0,
                                              'skills': [{'skillId': s1, 'score': 3}]}), 201)
        p2 = self.prog(eid, a)
        self.assertEqual(p2['r:l1'], p['r:l1'])
        self.assertIn('r:l2', p2)
        reached = [e['data'] for e in self.events(eid) if e['type'] == 'level.reached']
        self.assertEqual(reached, [{'member': a, 'level': 'l1'}, {'member': a, 'level': 'l2'}])

    def test_a_level_of_many_skills_is_judged_whole(self):
        # 70 skills in one level: reached only with all 70, over three awards.
        eid, owner, _, _, (m1,), sids = self.setup_entity(members=1, skills=70)
        a = m1.address.lower()
        self.assertOk(self.req('POST', '/api/entities/%s/levels/big/update?%s' %
                               (eid, self.auth(owner)),
                               {'name': 'big', 'XP': 0, 'skillIds': sids, 'scores': [1] * 70}),
                      201)
        for part in (sids[:32], sids[32:64]):
            self.assertOk(self.award(owner, eid, {'member': a, 'title': 'part', 'skills': [
                {'skillId': sid, 'score': 1} for sid in part]}), 201)
            self.assertNotIn('r:big', self.prog(eid, a))
        self.assertOk(self.award(owner, eid, {'member': a, 'title': 'last', 'skills': [
            {'skillId': sid, 'score': 1} for sid in sids[64:]]}), 201)
        self.assertIn('r:big', self.prog(eid, a))
        reached = [e['data'] for e in self.events(eid) if e['type'] == 'level.reached']
        self.assertEqual(reached, [{'member': a, 'level': 'big'}])

    def test_events_of_existing_writes(self):
        eid, owner, admin, stranger, ms, sids = self.setup_entity(members=1, skills=1)
        types = [(e['type'], e['data']) for e in self.events(eid)]
        self.assertEqual(types, [
            ('admin.added', {'addresses': [admin.address.lower()]}),
            ('member.added', {'addresses': [ms[0].address.lower()], 'chain': 'eth'}),
            ('skill.added', {'ids': sids}),
        ])
        # No change, no event.
        self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(owner)),
                               {'addresses': [ms[0].address], 'Chain': 'eth'}))
        self.assertOk(self.req('DELETE', '/api/entities/%s/admins/%s?%s' %
                               (eid, stranger.address, self.auth(owner))))
        self.assertEqual(len(self.events(eid)), 3)
        self.assertOk(self.req('DELETE', '/api/entities/%s/admins/%s?%s' %
                               (eid, admin.address, self.auth(owner))))
        self.assertOk(self.req('POST', '/api/entities/%s/levels/L/update?%s' %
                               (eid, self.auth(owner)),
                               {'name': 'L', 'XP': 1, 'skillIds': [], 'scores': []}), 201)
        body = {'name': 'Renamed', 'description': '', 'ownerAddresses': [owner.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': ''}
        self.assertOk(self.req('POST', '/api/entities?entityID=%s&%s' % (eid, self.auth(owner)),
                               body))
        evs = self.events(eid)
        self.assertEqual([(e['type'], e['data']) for e in evs[3:]], [
            ('admin.removed', {'address': admin.address.lower()}),
            ('level.updated', {'id': 'L', 'created': True}),
            ('entity.updated', {'__v': 1}),
        ])
        for e in evs:
            self.assertEqual(e['actor'], owner.address.lower())
            self.assertRegex(e['at'], ISO_MS)

    def test_events_trimmed(self):
        eid, owner, _, _, (m1, _), _ = self.setup_entity(skills=0)
        for _ in range(3):
            self.assertOk(self.award(owner, eid, {'contributions': [
                {'member': m1.address, 'title': 't', 'xp': 1}] * 100}), 201)
        n = self.r.cli('XLEN', 'ent:{%s}:events' % eid)
        self.assertLess(n, 300)
        self.assertGreaterEqual(n, 100)


if __name__ == '__main__':
    harness.main()
