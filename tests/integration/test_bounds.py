"""Bounded numbers and sizes (CONTRACT section 12): a member's XP and every skill score stay at
most 2^53 - 1 (an award that would pass it is 409 with the field at fault, nothing applied: alone,
in a batch, and among the grouped awards of one loop turn, where only it is refused); an entity's
skill tree has a byte budget (SKILLTREE_MAX_BYTES: growth past it is 409 naming the body field,
while writes that do not grow it pass, also once the tree is over a budget lowered since); its
event stream has one too (EVENTS_MAX_BYTES: the oldest events go, the newest stay, the stream's
memory stays near the budget).

Reaching 2^53 - 1 takes millions of awards, so a member's stored progress is set in Redis just
below it first (its prog hash, keys.h); everything after goes through the API."""

import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402

MAX = 2 ** 53 - 1
WALLETS = 40


def stream_id(x):
    return tuple(int(p) for p in x.split(b'-'))


class BoundsBase(harness.ServiceTestCase):
    ENV = {}

    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.r = cls.class_redis()
        env = {'RATE_WRITES_PER_MINUTE': '0', 'READ_CACHE_MB': '0'}
        env.update(cls.ENV)
        cls.svc = cls.class_entityd(redis=cls.r, env=env)
        cls.signer = harness.Signer(harness.current_message(cls.svc.port)[0])

    def auth(self, w):
        return self.signer.query(w)

    def req(self, method, path, body=None):
        return harness.request(self.svc.port, method, path, body=body, timeout=scaled(15))

    def entity(self, members=0, skills=()):
        owner = self.pool.pop()
        ms = [self.pool.pop() for _ in range(members)]
        eid = self.assertOk(self.req('POST', '/api/entities?' + self.auth(owner), {
            'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
            'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
            'imageUrl': '', 'public': True}), 201)['data']['id']
        if ms:
            self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' %
                                   (eid, self.auth(owner)),
                                   {'addresses': [m.address for m in ms], 'Chain': 'eth'}))
        sids = []
        if skills:
            out = self.assertOk(self.req('POST', '/api/skills/multiple?' + self.auth(owner), {
                'entityID': eid, 'names': list(skills)}), 201)
            sids = [s['id'] for s in out['data']]
        return eid, owner, ms, sids

    def ek(self, eid):
        return 'ent:{%s}' % eid

    def award_path(self, owner, eid):
        return '/api/entities/%s/contributions?%s' % (eid, self.auth(owner))


class NumberBoundTest(BoundsBase):
    def seed(self, eid, member, fields):
        """Sets a member's stored progress (keys.h: prog hash, 'xp' and 's:<skill id>') as
        many awards would have left it."""
        flat = []
        for k, v in fields.items():
            flat += [k, str(v)]
        self.r.cli('HSET', '%s:prog:%s' % (self.ek(eid), member.address.lower()), *flat)

    def snapshot(self, eid, owner, members, by):
        """What a refused award must leave as it was: each member's progress, the boards, the
        events, the contributions (the API's view and Redis's)."""
        out = {'events': self.r.cli('XLEN', self.ek(eid) + ':events'),
               'contribs': self.r.cli('HLEN', self.ek(eid) + ':contribs')}
        for m in members:
            p = self.assertOk(self.req('GET', '/api/entities/%s/members/%s/progress?%s' %
                                       (eid, m.address, self.auth(owner))))['data']
            out['progress ' + m.address] = (p['xp'], sorted((s['skillId'], s['score'])
                                                            for s in p['skills']))
            c = self.assertOk(self.req('GET', '/api/entities/%s/members/%s/contributions?%s' %
                                       (eid, m.address, self.auth(owner))))['data']
            out['contributions ' + m.address] = sorted(x['id'] for x in c)
        for b in by:
            out['board ' + b] = self.assertOk(self.req(
                'GET', '/api/entities/%s/leaderboard?by=%s&%s' % (eid, b, self.auth(owner))))['data']
        return out

    def test_xp_up_to_the_bound_and_not_past_it(self):
        eid, owner, (m, other), _ = self.entity(members=2)
        self.seed(eid, m, {'xp': MAX - 1000})
        path = self.award_path(owner, eid)
        got = self.assertOk(self.req('POST', path, {'member': m.address, 'title': 'To the top',
                                                    'xp': 1000}), 201)
        self.assertEqual(got['data']['xp'], 1000)
        before = self.snapshot(eid, owner, [m, other], ['xp'])
        self.assertEqual(before['progress ' + m.address][0], MAX)
        self.assertEqual(before['board xp'][0]['value'], MAX)
        resp = self.req('POST', path, {'member': m.address, 'title': 'One more', 'xp': 1})
        self.assertEnvelope(resp, 409, 'conflict', 'xp')
        self.assertIn('9007199254740991', resp[2]['error']['message'])
        self.assertEqual(self.snapshot(eid, owner, [m, other], ['xp']), before)
        # another member is not held back by it
        self.assertOk(self.req('POST', path, {'member': other.address, 'title': 'Fine',
                                              'xp': 7}), 201)

    def test_a_skill_score_up_to_the_bound_and_not_past_it(self):
        eid, owner, (m,), (s1, s2) = self.entity(members=1, skills=['Deep', 'Shallow'])
        self.seed(eid, m, {'s:' + s1: MAX - 5})
        path = self.award_path(owner, eid)
        self.assertOk(self.req('POST', path, {
            'member': m.address, 'title': 'Exactly', 'xp': 0,
            'skills': [{'skillId': s2, 'score': 1}, {'skillId': s1, 'score': 5}]}), 201)
        before = self.snapshot(eid, owner, [m], ['xp', s1, s2])
        self.assertIn((s1, MAX), before['progress ' + m.address][1])
        # xp defaults to the sum of the scores: 2, far from its bound; the score is at fault
        resp = self.req('POST', path, {
            'member': m.address, 'title': 'Past it',
            'skills': [{'skillId': s2, 'score': 1}, {'skillId': s1, 'score': 1}]})
        self.assertEnvelope(resp, 409, 'conflict', 'skills[1].score')
        self.assertEqual(self.snapshot(eid, owner, [m], ['xp', s1, s2]), before)

    def test_a_batch_with_one_contribution_past_the_bound_applies_none(self):
        eid, owner, (m, other), (s1,) = self.entity(members=2, skills=['Only'])
        self.seed(eid, m, {'xp': MAX - 100})
        before = self.snapshot(eid, owner, [m, other], ['xp', s1])
        # each alone would fit; the second and third together take m past the bound
        resp = self.req('POST', self.award_path(owner, eid), {'contributions': [
            {'member': other.address, 'title': 'Fine', 'xp': 5},
            {'member': m.address, 'title': 'Fits', 'xp': 60},
            {'member': m.address, 'title': 'Does not', 'xp': 50,
             'skills': [{'skillId': s1, 'score': 3}]}]})
        self.assertEnvelope(resp, 409, 'conflict', 'contributions[2].xp')
        self.assertEqual(self.snapshot(eid, owner, [m, other], ['xp', s1]), before)

    def test_grouped_awards_only_the_one_past_the_bound_is_refused(self):
        eid, owner, (m, a, b), (s1,) = self.entity(members=3, skills=['Grouped'])
        self.seed(eid, m, {'xp': MAX - 10})
        path = self.award_path(owner, eid)
        self.req('GET', '/api/entities/%s?%s' % (eid, self.auth(owner)))  # signature cached
        events = self.r.cli('XLEN', self.ek(eid) + ':events')
        calls = [('POST', path, {'member': a.address, 'title': 'A', 'xp': 3}),
                 ('POST', path, {'member': m.address, 'title': 'Too much', 'xp': 11}),
                 ('POST', path, {'member': b.address, 'title': 'B',
                                 'skills': [{'skillId': s1, 'score': 4}]}),
                 ('POST', path, {'member': m.address, 'title': 'Just so', 'xp': 10})]
        got = harness.read_answers(harness.one_turn(self.svc, self.r, calls))
        self.assertEqual([s for s, _ in got], [201, 409, 201, 201], got)
        self.assertEqual(got[1][1]['error']['code'], 'conflict')
        self.assertEqual(got[1][1]['error']['field'], 'xp')
        # one script call for the four
        stats = self.r.cli('INFO', 'commandstats').decode()
        self.assertIn('cmdstat_evalsha:calls=1,', stats)
        snap = self.snapshot(eid, owner, [m, a, b], ['xp'])
        self.assertEqual(snap['progress ' + m.address][0], MAX)
        self.assertEqual(snap['progress ' + a.address][0], 3)
        self.assertEqual(snap['progress ' + b.address], (4, [(s1, 4)]))
        self.assertEqual(len(snap['contributions ' + m.address]), 1)
        self.assertEqual(snap['events'], events + 3)
        self.assertEqual(snap['contribs'], 3)


class SkillTreeBudgetTest(BoundsBase):
    BUDGET = 20000
    ENV = {'SKILLTREE_MAX_BYTES': str(BUDGET)}

    def tree(self, eid):
        return self.r.cli('HGET', self.ek(eid), 'skilltree') or b''

    def refused(self, resp, field, eid, before):
        self.assertEnvelope(resp, 409, 'conflict', field)
        self.assertIn('SKILLTREE_MAX_BYTES', resp[2]['error']['message'])
        self.assertEqual(self.tree(eid), before[0])
        self.assertEqual(self.r.cli('XLEN', self.ek(eid) + ':events'), before[1])

    def state(self, eid):
        return (self.tree(eid), self.r.cli('XLEN', self.ek(eid) + ':events'))

    def test_growth_past_the_budget_is_refused_and_shrinking_passes_once_over(self):
        eid, owner, _, _ = self.entity()
        q = self.auth(owner)
        ids = []
        for i in range(4):  # about 4.2 KB each
            ids.append(self.assertOk(self.req('POST', '/api/skills?' + q, {
                'entityID': eid, 'name': 'Skill %d' % i, 'description': 'd' * 4000}),
                201)['data']['id'])
        # one more, sized to leave about 500 bytes of the budget
        room = self.BUDGET - len(self.tree(eid))
        ids.append(self.assertOk(self.req('POST', '/api/skills?' + q, {
            'entityID': eid, 'name': 'Filler', 'description': 'f' * (room - 750)}),
            201)['data']['id'])
        room = self.BUDGET - len(self.tree(eid))
        self.assertTrue(300 < room < 700, room)
        before = self.state(eid)
        # one skill more: the tree would pass 20000 bytes
        self.refused(self.req('POST', '/api/skills?' + q, {
            'entityID': eid, 'name': 'Skill X', 'description': 'd' * 5000}), 'description', eid,
            before)
        # a batch: the second would not fit
        self.refused(self.req('POST', '/api/skills/multiple?' + q, {
            'entityID': eid, 'names': ['B0', 'B1'],
            'descriptions': ['x' * 10, 'x' * 5000]}), 'descriptions[1]', eid, before)
        # a longer description of a skill there
        self.refused(self.req('POST', '/api/entities/%s/skills/%s/update?%s' % (eid, ids[0], q),
                              {'description': 'e' * 5000}), 'description', eid, before)
        # a level with a long description
        self.refused(self.req('POST', '/api/entities/%s/levels/lv1/update?%s' % (eid, q), {
            'name': 'Level one', 'description': 'l' * 5000, 'XP': 10, 'skillIds': [ids[0]],
            'scores': [1]}), 'description', eid, before)
        # what fits still passes
        self.assertOk(self.req('POST', '/api/entities/%s/levels/lv1/update?%s' % (eid, q), {
            'name': 'Level one', 'description': 'short', 'XP': 10, 'skillIds': [ids[0]],
            'scores': [1]}), 201)

        # The budget lowered below the tree's size, the same Redis: growth is refused, and what
        # does not grow the tree passes.
        self.svc.stop()
        svc = self.entityd(redis=self.r, env={'RATE_WRITES_PER_MINUTE': '0',
                                              'READ_CACHE_MB': '0',
                                              'SKILLTREE_MAX_BYTES': '8000'})
        self.svc = svc
        self.assertGreater(len(self.tree(eid)), 8000)
        before = self.state(eid)
        self.refused(self.req('POST', '/api/entities/%s/skills/%s/update?%s' % (eid, ids[1], q),
                              {'description': 'd' * 4001}), 'description', eid, before)
        self.refused(self.req('POST', '/api/skills?' + q, {'entityID': eid, 'name': 'Tiny'}),
                     'name', eid, before)
        self.assertOk(self.req('POST', '/api/entities/%s/skills/%s/update?%s' % (eid, ids[0], q),
                               {'description': 'now short'}))
        self.assertOk(self.req('POST', '/api/entities/%s/skills/%s/update?%s' % (eid, ids[1], q),
                               {'description': 'd' * 4000}))  # the same size: no growth
        for sid in ids[2:]:
            self.assertOk(self.req('DELETE', '/api/entities/%s/skills/%s?%s' % (eid, sid, q)))
        self.assertLess(len(self.tree(eid)), 8000)


class EventBudgetTest(BoundsBase):
    BUDGET = 50000
    ENV = {'EVENTS_MAX_BYTES': str(BUDGET)}

    def test_the_oldest_events_go_and_the_stream_stays_near_its_budget(self):
        eid, owner, (m,), _ = self.entity(members=1)
        key = self.ek(eid) + ':events'
        q = self.auth(owner)
        first = self.r.cli('XREVRANGE', key, '+', '-', 'COUNT', 1)[0][0]
        # member.added events of 100 addresses each (about 4.5 KB), then awards (about 0.3 KB)
        for i in range(30):
            self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, q), {
                'addresses': ['0x' + os.urandom(20).hex() for _ in range(100)], 'Chain': 'eth'}))
        peak = 0
        path = self.award_path(owner, eid)
        for i in range(200):
            self.assertOk(self.req('POST', path, {'member': m.address, 'title': 'Award %d' % i,
                                                  'xp': 1}), 201)
            peak = max(peak, self.r.cli('MEMORY', 'USAGE', key, 'SAMPLES', '0'))
        newest = self.r.cli('XREVRANGE', key, '+', '-', 'COUNT', 1)[0]
        used = self.r.cli('MEMORY', 'USAGE', key, 'SAMPLES', '0')
        entries = self.r.cli('XRANGE', key, '-', '+')
        data = sum(len(v) for _, fields in entries for v in fields)
        # 30 x 4.5 KB + 200 x 0.3 KB written: near the budget is what stays
        self.assertLessEqual(used, self.BUDGET * 1.25, (used, len(entries)))
        self.assertLessEqual(peak, self.BUDGET * 1.25, peak)
        self.assertGreaterEqual(used, self.BUDGET * 0.5, (used, len(entries)))
        self.assertLessEqual(data, self.BUDGET)
        # the oldest went, the newest stayed, and every one kept is in order
        self.assertGreater(stream_id(entries[0][0]), stream_id(first))
        self.assertEqual(entries[-1][0], newest[0])
        self.assertIn(b'contribution.added', newest[1])
        ids = [e[0] for e in entries]
        self.assertEqual(ids, sorted(ids, key=stream_id))
        # the events read still pages from the oldest kept
        got = self.assertOk(self.req('GET', '/api/entities/%s/events?%s&limit=1' % (eid, q)))
        self.assertEqual(got['data'][0]['id'], entries[0][0].decode())


if __name__ == '__main__':
    harness.main()
