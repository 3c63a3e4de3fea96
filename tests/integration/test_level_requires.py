"""Levels that build on levels (CONTRACT section 15): `requires` on a level's create and update
in every encoding skillIds takes, unknown ids, duplicates and cycles refused with nothing
written, a required level kept from deletion, every Level object with `requires`, progress with
`requires`, `unlocked` and `missing.levels`, a level reached only once its required levels are,
one award reaching a chain writing its level.reached events prerequisites first (whatever the
levels' XP order), a level required by one deleted and created again, and every key's
invariants after."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from invariants import check_invariants  # noqa: E402
from test_attest import KEY, key_file  # noqa: E402
from test_progression import Api, ProgressionBase  # noqa: E402

WALLETS = 60


class LevelRequiresTest(ProgressionBase):
    """One Redis and one entityd for the class; each test its own entity."""

    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env={'ATTESTATION_KEY_FILE': key_file(KEY)})
        cls.api = Api(cls.svc.port)

    def level(self, w, eid, lvid, requires=None, skill_ids=(), scores=(), xp=0):
        body = {'name': 'Level %s' % lvid, 'description': '', 'skillIds': list(skill_ids),
                'scores': list(scores), 'endsAt': '', 'XP': xp}
        if requires is not None:
            body['requires'] = requires
        return self.api.req('POST', '/api/entities/%s/levels/%s/update?%s' %
                            (eid, lvid, self.api.auth(w)), body)

    def tree_levels(self, w, eid):
        body = self.assertOk(self.api.req('GET', '/api/skills?entityID=%s&%s' %
                                          (eid, self.api.auth(w))))
        return {lv['id']: lv for lv in body['data']['levels']}

    def reached_events(self, w, eid):
        return [(e['data']['member'], e['data']['level'])
                for e in self.all_events(w, eid) if e['type'] == 'level.reached']

    def assertInvariants(self):
        problems = check_invariants(self.r)
        self.assertEqual(problems, [], '\n'.join(problems[:20]))

    def test_requires_on_create_and_update(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, admin = c['owner'], c['admin']
        a = self.assertOk(self.level(owner, eid, 'A', xp=1), 201)['data']
        self.assertEqual(a['requires'], [])
        # every encoding skillIds takes: a JSON array, a string holding one, a comma list
        b = self.assertOk(self.level(admin, eid, 'B', ['A'], xp=2), 201)['data']
        self.assertEqual(b['requires'], ['A'])
        cc = self.assertOk(self.level(owner, eid, 'C', '["A","B"]', xp=3), 201)['data']
        self.assertEqual(cc['requires'], ['A', 'B'])
        d = self.assertOk(self.level(owner, eid, 'D', 'B, C', xp=4), 201)['data']
        self.assertEqual(d['requires'], ['B', 'C'])
        # an update without requires keeps them; with [] clears them
        self.assertEqual(self.assertOk(self.level(owner, eid, 'D', xp=5))['data']['requires'],
                         ['B', 'C'])
        tree = self.tree_levels(owner, eid)
        self.assertEqual({k: v['requires'] for k, v in tree.items()},
                         {'A': [], 'B': ['A'], 'C': ['A', 'B'], 'D': ['B', 'C']})
        self.assertEqual(self.assertOk(self.level(owner, eid, 'D', []))['data']['requires'], [])
        self.assertEqual(self.assertOk(self.level(owner, eid, 'D', 'C'))['data']['requires'],
                         ['C'])

    def test_requires_refused(self):
        eid, c, _ = self.setup_entity()
        owner = c['owner']
        for lvid, req in (('A', []), ('B', ['A']), ('C', ['B'])):
            self.assertOk(self.level(owner, eid, lvid, req), 201)
        before = self.tree_levels(owner, eid)
        events = len(self.all_events(owner, eid))
        # unknown, malformed, too many, twice: 400 requires
        self.assertField(self.level(owner, eid, 'C', ['B', 'nope']), 'requires')
        self.assertField(self.level(owner, eid, 'N', ['nope']), 'requires')
        self.assertField(self.level(owner, eid, 'C', ['bad id']), 'requires')
        self.assertField(self.level(owner, eid, 'C', [7]), 'requires')
        self.assertField(self.level(owner, eid, 'C', ['A'] * 2), 'requires')
        self.assertField(self.level(owner, eid, 'C', ['L%d' % i for i in range(17)]),
                         'requires')
        self.assertField(self.level(owner, eid, 'C', {'A': 1}), 'requires')
        # a cycle: 409 requires, the message naming it
        st, _, body = self.level(owner, eid, 'A', ['C'])
        self.assertEnvelope((st, _, body), 409, 'conflict', 'requires')
        self.assertIn('A -> C -> B -> A', body['error']['message'])
        st, _, body = self.level(owner, eid, 'B', ['B'])
        self.assertEnvelope((st, _, body), 409, 'conflict', 'requires')
        self.assertIn('B -> B', body['error']['message'])
        st, _, body = self.level(owner, eid, 'N', ['A', 'N'])
        self.assertEnvelope((st, _, body), 409, 'conflict', 'requires')
        # nothing written by any of them
        self.assertEqual(self.tree_levels(owner, eid), before)
        self.assertEqual(len(self.all_events(owner, eid)), events)
        # a level of another entity is unknown here
        eid2, c2, _ = self.setup_entity()
        self.assertOk(self.level(c2['owner'], eid2, 'X', []), 201)
        self.assertField(self.level(owner, eid, 'C', ['X']), 'requires')
        self.assertInvariants()

    def test_delete_required_level(self):
        eid, c, _ = self.setup_entity()
        owner = c['owner']
        for lvid, req in (('A', []), ('C', ['A']), ('B', ['A']), ('D', ['C'])):
            self.assertOk(self.level(owner, eid, lvid, req), 201)
        path = '/api/entities/%s/levels/%%s?%s' % (eid, self.api.auth(owner))
        st, _, body = self.api.req('DELETE', path % 'A')
        self.assertEnvelope((st, _, body), 409, 'conflict', 'lvID')
        self.assertIn('B, C', body['error']['message'])
        self.assertIn('A', self.tree_levels(owner, eid))
        self.assertOk(self.api.req('DELETE', path % 'D'))
        self.assertOk(self.level(owner, eid, 'B', []))
        self.assertOk(self.level(owner, eid, 'C', []))
        self.assertOk(self.api.req('DELETE', path % 'A'))
        self.assertEqual(set(self.tree_levels(owner, eid)), {'B', 'C'})
        self.assertInvariants()

    def test_reached_only_with_required_levels(self):
        eid, c, (s1, s2) = self.setup_entity(members=2)
        owner, m, m2 = c['owner'], c['member'].address, c['member2'].address
        self.assertOk(self.level(owner, eid, 'Junior', [], [s1], [5], 10), 201)
        self.assertOk(self.level(owner, eid, 'Senior', ['Junior'], [], [], 5), 201)
        # Senior's own thresholds met, Junior not reached: Senior not reached, nothing recorded
        self.award_ok(owner, eid, {'member': m, 'xp': 12, 'title': 'xp'})
        p = self.prog(owner, eid, m)
        sen, jun = self.level_of(p, 'Senior'), self.level_of(p, 'Junior')
        self.assertEqual(set(sen), {'id', 'name', 'XP', 'requires', 'reached', 'unlocked',
                                    'reachedAt', 'missing'})
        self.assertEqual((sen['requires'], sen['reached'], sen['unlocked'], sen['reachedAt'],
                          sen['missing']),
                         (['Junior'], False, False, None,
                          {'xp': 0, 'skills': [], 'levels': ['Junior']}))
        self.assertEqual((jun['requires'], jun['reached'], jun['unlocked'], jun['missing']),
                         ([], False, True, {'xp': 0, 'skills': [
                             {'skillId': s1, 'need': 5, 'have': 0}], 'levels': []}))
        self.assertIsNone(p['level'])
        self.assertEqual(self.reached_events(owner, eid), [])
        # Junior reached: Senior with it, in the same award, Junior's event first
        self.award_ok(owner, eid, self.contrib(m, [s1], [5]))
        p = self.prog(owner, eid, m)
        sen, jun = self.level_of(p, 'Senior'), self.level_of(p, 'Junior')
        self.assertEqual((sen['reached'], sen['unlocked'], sen['missing']['levels']),
                         (True, True, []))
        self.assertTrue(jun['reached'])
        self.assertEqual(sen['reachedAt'], jun['reachedAt'])
        self.assertEqual(p['level'], 'Junior')  # the highest XP reached
        self.assertEqual(self.reached_events(owner, eid), [(m, 'Junior'), (m, 'Senior')])
        # Junior's threshold raised: Senior not reached now either; both reachedAt kept
        self.assertOk(self.level(owner, eid, 'Junior', None, [s1], [50], 10))
        p = self.prog(owner, eid, m)
        sen = self.level_of(p, 'Senior')
        self.assertEqual((sen['reached'], sen['unlocked'], sen['missing']['levels']),
                         (False, False, ['Junior']))
        self.assertIsNotNone(sen['reachedAt'])
        # a second member reaching Junior's thresholds before Senior's XP: Senior later
        self.assertOk(self.level(owner, eid, 'Junior', None, [s1], [5], 1))
        self.assertOk(self.level(owner, eid, 'Senior', None, [s2], [3], 5))
        self.award_ok(owner, eid, self.contrib(m2, [s1], [5], xp=1))
        self.award_ok(owner, eid, self.contrib(m2, [s2], [3], xp=4))
        self.assertEqual(self.reached_events(owner, eid)[2:], [(m2, 'Junior'), (m2, 'Senior')])
        self.assertInvariants()

    def test_chain_reached_in_one_award_prerequisites_first(self):
        eid, c, (s1, _) = self.setup_entity(members=2)
        owner, m, m2 = c['owner'], c['member'].address, c['member2'].address
        # XP order: L3, L2, L1, L0; requires order: L0 <- L1 <- L2 <- L3; L4 beside them
        self.assertOk(self.level(owner, eid, 'L0', [], [s1], [1], 40), 201)
        tpl = self.r.cli('HGET', 'ent:{%s}' % eid, 'progtpl').decode()
        self.assertFalse(tpl.endswith('\nR'), tpl)
        self.assertOk(self.level(owner, eid, 'L1', ['L0'], [], [], 30), 201)
        self.assertOk(self.level(owner, eid, 'L2', ['L1'], [], [], 20), 201)
        self.assertOk(self.level(owner, eid, 'L3', ['L2', 'L0'], [], [], 10), 201)
        self.assertOk(self.level(owner, eid, 'L4', [], [], [], 15), 201)
        # a template with requires says so in its last line (the award's parse looks then);
        # the lines of levels without requires are as they were before requires existed
        tpl = self.r.cli('HGET', 'ent:{%s}' % eid, 'progtpl').decode()
        self.assertTrue(tpl.endswith('\nR'), tpl)
        lines = {ln.split('\t')[1]: ln for ln in tpl.split('\n') if ln.startswith('L\t')}
        self.assertEqual(lines['L4'].count('\t'), 5)
        self.assertEqual(lines['L3'].split('\t')[6:], ['2 4'])  # L2, L0 by place (XP order)
        self.award_ok(owner, eid, self.contrib(m, [s1], [1], xp=40))
        self.assertEqual(self.reached_events(owner, eid),
                         [(m, 'L4'), (m, 'L0'), (m, 'L1'), (m, 'L2'), (m, 'L3')])
        p = self.prog(owner, eid, m)
        self.assertTrue(all(lv['reached'] and lv['unlocked'] for lv in p['levels']), p)
        self.assertEqual(self.level_of(p, 'L3')['requires'], ['L2', 'L0'])
        self.assertEqual(p['level'], 'L0')
        # a batch: the chain reached by its second contribution, the events after the first's
        self.award_ok(owner, eid, {'contributions': [self.contrib(m2, [], [], xp=39),
                                                     self.contrib(m2, [s1], [1], xp=1)]})
        self.assertEqual(self.reached_events(owner, eid)[5:],
                         [(m2, 'L4'), (m2, 'L0'), (m2, 'L1'), (m2, 'L2'), (m2, 'L3')])
        self.assertInvariants()

    def test_required_level_deleted_and_created_again(self):
        eid, c, (s1, _) = self.setup_entity(members=2)
        owner, m, m2 = c['owner'], c['member'].address, c['member2'].address
        self.assertOk(self.level(owner, eid, 'A', [], [s1], [1], 1), 201)
        self.award_ok(owner, eid, self.contrib(m, [s1], [1], xp=1))
        path = '/api/entities/%s/levels/A?%s' % (eid, self.api.auth(owner))
        self.assertOk(self.api.req('DELETE', path))
        # A of a new generation: m's record of the old A does not count for B
        self.assertOk(self.level(owner, eid, 'A', [], [s1], [2], 1), 201)
        self.assertOk(self.level(owner, eid, 'B', ['A'], [], [], 1), 201)
        self.award_ok(owner, eid, {'member': m, 'xp': 1, 'title': 'more'})
        p = self.prog(owner, eid, m)
        self.assertEqual((self.level_of(p, 'A')['reached'], self.level_of(p, 'B')['reached'],
                          self.level_of(p, 'B')['missing']['levels']), (False, False, ['A']))
        self.award_ok(owner, eid, self.contrib(m, [s1], [1]))
        self.award_ok(owner, eid, self.contrib(m2, [s1], [2], xp=1))
        self.assertEqual(self.reached_events(owner, eid),
                         [(m, 'A'), (m, 'A'), (m, 'B'), (m2, 'A'), (m2, 'B')])
        self.assertInvariants()

    def test_level_of_an_earlier_release(self):
        """A Level JSON stored before requires existed (no "requires" key) requires nothing:
        judged and shown with requires [], and other levels may require it."""
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        old = self.assertOk(self.level(owner, eid, 'old', [], [s1], [1], 1), 201)['data']
        text = self.r.cli('HGET', 'ent:{%s}:levels' % eid, 'old').decode()
        bare = text.replace(',"requires":[]', '')
        self.assertNotEqual(bare, text)
        self.r.cli('HSET', 'ent:{%s}:levels' % eid, 'old', bare)
        self.r.cli('ZREM', 'ent:{%s}:levels:order' % eid, text)
        self.r.cli('ZADD', 'ent:{%s}:levels:order' % eid, old['XP'], bare)
        self.assertOk(self.level(owner, eid, 'new', ['old'], [], [], 1), 201)
        self.assertNotIn('requires', self.r.cli('HGET', 'ent:{%s}:levels' % eid, 'old').decode())
        self.assertEqual(self.tree_levels(owner, eid)['old']['requires'], [])
        self.award_ok(owner, eid, self.contrib(m, [s1], [1], xp=1))
        p = self.prog(owner, eid, m)
        self.assertEqual([(lv['id'], lv['requires'], lv['reached']) for lv in p['levels']],
                         [('new', ['old'], True), ('old', [], True)])
        self.assertEqual(self.reached_events(owner, eid), [(m, 'old'), (m, 'new')])
        # replaced without requires: none, as before
        self.assertEqual(self.assertOk(self.level(owner, eid, 'old', None, [s1], [1], 1))
                         ['data']['requires'], [])
        st, _, body = self.level(owner, eid, 'old', ['new'])
        self.assertEnvelope((st, _, body), 409, 'conflict', 'requires')
        self.assertIn('old -> new -> old', body['error']['message'])

    def test_attestations_follow_the_records(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, mw = c['owner'], c['member']
        m = mw.address

        def attested():
            body = self.assertOk(self.api.req('GET', '/api/entities/%s/members/%s/attestations?%s'
                                              % (eid, m, self.api.auth(mw))))
            return sorted(a['levelId'] for a in body['data'])

        self.assertOk(self.level(owner, eid, 'base', [], [s1], [3], 1), 201)
        self.assertOk(self.level(owner, eid, 'top', ['base'], [], [], 1), 201)
        # top's own thresholds met, base not: neither recorded, neither attested
        self.award_ok(owner, eid, {'member': m, 'xp': 1, 'title': 'xp'})
        self.assertEqual(attested(), [])
        self.award_ok(owner, eid, self.contrib(m, [s1], [3]))
        self.assertEqual(attested(), ['base', 'top'])
        # base's threshold raised: top not reached now, both still attested from their records
        self.assertOk(self.level(owner, eid, 'base', None, [s1], [30], 1))
        self.assertFalse(self.level_of(self.prog(owner, eid, m), 'top')['reached'])
        self.assertEqual(attested(), ['base', 'top'])


if __name__ == '__main__':
    harness.main()
