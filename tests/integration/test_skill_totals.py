"""Skill trees, the totals (CONTRACT section 15): a member's total in a skill is its own score
plus its children's totals. Progress lists each skill with a total above 0, with score and
total, in pre-order; a level's threshold is met by the total, in progress and at award time;
a branch moved or a leaf with scores deleted changes progress and judgement at once, keeping
the reachedAt recorded before; a flat entity (and one of an earlier release) answers as
before, each total its own score."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from test_progression import Api, ProgressionBase  # noqa: E402
import test_skill_tree as tree  # noqa: E402
from test_skill_tree import DEPTH_MAX, text  # noqa: E402


class SkillTotalsTest(ProgressionBase):
    """One Redis and one entityd for the class; each test its own entity."""

    # the skill side's set-up and helpers (its tests stay in its own file: the class is not
    # imported by name, so this module's loader never finds it)
    setUpClass = tree.SkillTreeTest.__dict__['setUpClass']
    new, many, move, delete, events_of, owner_entity, make_earlier_release = (
        tree.SkillTreeTest.new, tree.SkillTreeTest.many, tree.SkillTreeTest.move,
        tree.SkillTreeTest.delete, tree.SkillTreeTest.events_of,
        tree.SkillTreeTest.owner_entity, tree.SkillTreeTest.make_earlier_release)

    def items(self, p):
        """progress skills as [(id, score, total)], in their order."""
        return [(s['skillId'], s['score'], s['total']) for s in p['skills']]

    def missing(self, p, lvid):
        return [(m['skillId'], m['need'], m['have'])
                for m in self.level_of(p, lvid)['missing']['skills']]

    def reached_of(self, w, eid):
        return [e['level'] for e in self.events_of(w, eid, 'level.reached')]

    def setup(self):
        owner, eid = self.owner_entity()
        member, other = self.wallets(2)
        self.add_members(owner, eid, member.address, other.address)
        return owner, eid, member.address, other.address

    def test_depth_8_totals_roll_up_into_progress_and_levels(self):
        owner, eid, m, _ = self.setup()
        chain = [self.new(owner, eid, 'Depth 0')['id']]
        for d in range(1, DEPTH_MAX + 1):
            chain.append(self.new(owner, eid, 'Depth %d' % d, parent=chain[-1])['id'])
        aside = self.new(owner, eid, 'Aside')['id']
        root, mid, leaf = chain[0], chain[4], chain[-1]
        self.assertOk(self.put_level(owner, eid, 'lead', [root], [10]), 201)
        self.assertOk(self.put_level(owner, eid, 'mid', [mid], [5]), 201)
        # A score at depth 8 counts in every skill above it, each listed with its own score.
        self.award_ok(owner, eid, self.contrib(m, [leaf], [4]))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p), [(s, 4 if s == leaf else 0, 4) for s in chain])
        self.assertEqual([s['name'] for s in p['skills']],
                         ['Depth %d' % d for d in range(DEPTH_MAX + 1)])
        self.assertEqual(self.missing(p, 'mid'), [(mid, 5, 4)])
        self.assertEqual(self.missing(p, 'lead'), [(root, 10, 4)])
        self.assertFalse(self.level_of(p, 'mid')['reached'])
        # Its own score in the middle of the chain reaches a level on the middle at award time.
        self.award_ok(owner, eid, self.contrib(m, [mid], [1]))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p)[:6], [(s, 1 if s == mid else 0, 5) for s in chain[:5]] +
                         [(chain[5], 0, 4)])
        self.assertTrue(self.level_of(p, 'mid')['reached'])
        self.assertIsNotNone(self.level_of(p, 'mid')['reachedAt'])
        self.assertEqual(self.missing(p, 'lead'), [(root, 10, 5)])
        self.assertEqual(self.reached_of(owner, eid), ['mid'])
        # The root's own score and the branch's together reach the root's level.
        self.award_ok(owner, eid, self.contrib(m, [root, aside], [5, 2]))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p)[0], (root, 5, 10))
        self.assertEqual(self.items(p)[-1], (aside, 2, 2))
        self.assertTrue(self.level_of(p, 'lead')['reached'])
        self.assertEqual(self.reached_of(owner, eid), ['mid', 'lead'])
        # The template says it is a tree in its first line; the prog hash keeps own scores.
        self.assertTrue(text(self.r.cli('HGET', 'ent:{%s}' % eid, 'progtpl')).startswith('T\n'))
        self.assertEqual(text(self.r.cli('HGET', 'ent:{%s}:prog:%s' % (eid, m), 's:' + root)),
                         '5')

    def test_member_with_many_scored_skills(self):
        # Past 32 scored skills the award cuts the whole tree at once rather than search each
        # skill's line: the same totals either way.
        owner, eid, m, _ = self.setup()
        root = self.new(owner, eid, 'Root')['id']
        mid = self.new(owner, eid, 'Mid', parent=root)['id']
        st, _, body = self.many(owner, eid, ['Kid %d' % i for i in range(40)], [mid] * 40)
        self.assertEqual(st, 201, body)
        kids = [s['id'] for s in body['data']]
        self.assertOk(self.put_level(owner, eid, 'forty', [root, mid], [40, 40]), 201)
        self.award_ok(owner, eid, self.contrib(m, kids[:20], [1] * 20))
        self.award_ok(owner, eid, self.contrib(m, kids[20:39], [1] * 19))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.missing(p, 'forty'), [(root, 40, 39), (mid, 40, 39)])
        self.assertEqual(self.reached_of(owner, eid), [])
        self.award_ok(owner, eid, self.contrib(m, [kids[39]], [1]))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p)[:3], [(root, 0, 40), (mid, 0, 40), (kids[0], 1, 1)])
        self.assertEqual(len(p['skills']), 42)
        self.assertIsNotNone(self.level_of(p, 'forty')['reachedAt'])
        self.assertEqual(self.reached_of(owner, eid), ['forty'])

    def test_branch_moved_changes_progress_and_judgement_at_once(self):
        owner, eid, m, _ = self.setup()
        a = self.new(owner, eid, 'A')['id']
        b = self.new(owner, eid, 'B')['id']
        x = self.new(owner, eid, 'X', parent=a)['id']
        leaf = self.new(owner, eid, 'Leaf', parent=x)['id']
        self.assertOk(self.put_level(owner, eid, 'a6', [a], [6]), 201)
        self.assertOk(self.put_level(owner, eid, 'b6', [b], [6]), 201)
        self.award_ok(owner, eid, self.contrib(m, [leaf], [6]))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p), [(a, 0, 6), (x, 0, 6), (leaf, 6, 6)])
        at = self.level_of(p, 'a6')['reachedAt']
        self.assertIsNotNone(at)
        self.assertEqual(self.missing(p, 'b6'), [(b, 6, 0)])
        self.assertOk(self.move(owner, eid, x, {'parentId': b}))
        # At once: the branch's scores count under B, no longer under A.
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p), [(b, 0, 6), (x, 0, 6), (leaf, 6, 6)])
        a6, b6 = self.level_of(p, 'a6'), self.level_of(p, 'b6')
        self.assertEqual((a6['reached'], a6['reachedAt']), (False, at))
        self.assertEqual(self.missing(p, 'a6'), [(a, 6, 0)])
        self.assertEqual((b6['reached'], b6['reachedAt'], b6['missing']['skills']),
                         (True, None, []))
        # One newly met is recorded at the member's next award, whatever it awards.
        self.award_ok(owner, eid, self.contrib(m, xp=1))
        p = self.prog(owner, eid, m)
        self.assertIsNotNone(self.level_of(p, 'b6')['reachedAt'])
        self.assertEqual(self.level_of(p, 'a6')['reachedAt'], at)
        self.assertEqual(self.reached_of(owner, eid), ['a6', 'b6'])
        # Back to a root: neither A nor B counts it; a level on X still does.
        self.assertOk(self.move(owner, eid, x, {'parentId': None}))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p), [(x, 0, 6), (leaf, 6, 6)])
        self.assertEqual([self.level_of(p, lv)['reached'] for lv in ('a6', 'b6')],
                         [False, False])

    def test_leaf_with_scores_deleted_changes_totals_at_once(self):
        owner, eid, m, n = self.setup()
        top = self.new(owner, eid, 'Top')['id']
        leaf = self.new(owner, eid, 'Leaf', parent=top)['id']
        self.assertOk(self.put_level(owner, eid, 'five', [top], [5]), 201)
        self.award_ok(owner, eid, self.contrib(m, [top, leaf], [2, 4]))
        self.award_ok(owner, eid, self.contrib(n, [top, leaf], [2, 2]))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p), [(top, 2, 6), (leaf, 4, 4)])
        at = self.level_of(p, 'five')['reachedAt']
        self.assertIsNotNone(at)
        self.assertEqual(self.missing(self.prog(owner, eid, n), 'five'), [(top, 5, 4)])
        self.assertOk(self.delete(owner, eid, leaf))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p), [(top, 2, 2)])
        self.assertEqual((self.level_of(p, 'five')['reached'],
                          self.level_of(p, 'five')['reachedAt']), (False, at))
        self.assertEqual(self.missing(self.prog(owner, eid, n), 'five'), [(top, 5, 2)])
        # A new leaf's scores count; the deleted one's stay stored, counted nowhere.
        kid = self.new(owner, eid, 'Kid', parent=top)['id']
        self.award_ok(owner, eid, self.contrib(n, [kid], [3]))
        p = self.prog(owner, eid, n)
        self.assertEqual(self.items(p), [(top, 2, 5), (kid, 3, 3)])
        self.assertTrue(self.level_of(p, 'five')['reached'])
        self.assertIsNotNone(self.level_of(p, 'five')['reachedAt'])
        self.assertEqual(text(self.r.cli('HGET', 'ent:{%s}:prog:%s' % (eid, n), 's:' + leaf)),
                         '2')
        self.assertEqual(self.reached_of(owner, eid), ['five', 'five'])

    def test_flat_entity_totals_are_own_scores(self):
        owner, eid, m, _ = self.setup()
        a = self.new(owner, eid, 'Rust')['id']
        b = self.new(owner, eid, 'Go')['id']
        self.assertOk(self.put_level(owner, eid, 'gold', [a, b], [2, 3]), 201)
        self.award_ok(owner, eid, self.contrib(m, [b, a], [2, 2]))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p), [(a, 2, 2), (b, 2, 2)])
        self.assertEqual(self.missing(p, 'gold'), [(b, 3, 2)])
        # No tree line in a flat entity's template: nothing is rolled up.
        tpl = text(self.r.cli('HGET', 'ent:{%s}' % eid, 'progtpl'))
        self.assertFalse(tpl.startswith('T\n'), tpl)
        self.award_ok(owner, eid, self.contrib(m, [b], [1]))
        self.assertTrue(self.level_of(self.prog(owner, eid, m), 'gold')['reached'])
        # A child makes it a tree; deleting the child makes it flat again.
        c = self.new(owner, eid, 'Tokio', parent=a)['id']
        self.assertTrue(text(self.r.cli('HGET', 'ent:{%s}' % eid, 'progtpl')).startswith('T\n'))
        self.assertOk(self.delete(owner, eid, c))
        self.assertFalse(text(self.r.cli('HGET', 'ent:{%s}' % eid,
                                          'progtpl')).startswith('T\n'))

    def test_earlier_release_flat_entity_reads_and_awards_unchanged(self):
        owner, eid, m, _ = self.setup()
        a = self.new(owner, eid, 'Rust')['id']
        b = self.new(owner, eid, 'Go')['id']
        self.assertOk(self.put_level(owner, eid, 'gold', [a, b], [2, 1], xp=3), 201)
        self.award_ok(owner, eid, self.contrib(m, [a], [1], xp=1))
        want = self.prog(owner, eid, m)
        self.make_earlier_release(eid)
        self.assertEqual(self.prog(owner, eid, m), want)
        self.assertEqual(self.items(want), [(a, 1, 1)])
        self.award_ok(owner, eid, self.contrib(m, [a, b], [1, 1], xp=2))
        p = self.prog(owner, eid, m)
        self.assertEqual(self.items(p), [(a, 2, 2), (b, 1, 1)])
        self.assertTrue(self.level_of(p, 'gold')['reached'])
        self.assertEqual(self.reached_of(owner, eid), ['gold'])


class TreeRoundTripTest(ProgressionBase):
    """Progress of a member in a tree is still one round trip to Redis (CONTRACT section 15):
    with every Redis reply held by the RESP proxy, the read takes one delay, not two. The read
    cache is off here (an answer from it takes none)."""

    def test_progress_of_a_tree_one_round_trip(self):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), 'adversary'))
        from harness import FaultProxy
        self.pool = harness.Wallet.random(4)
        r = self.redis()
        p = FaultProxy(r.port).start()
        self.addCleanup(p.stop)
        svc = self.entityd(redis=r, env={'REDIS_TIMEOUT_MS': '5000', 'READ_CACHE_MB': '0',
                                         'REDIS_URL': 'redis://127.0.0.1:%d/0' % p.port})
        self.api = Api(svc.port)
        owner, member = self.wallets(2)
        eid = self.create_entity(owner)
        self.add_members(owner, eid, member.address)
        chain = [self.add_skill(owner, eid, 'Root')]
        for d in range(1, DEPTH_MAX + 1):
            body = {'name': 'D%d' % d, 'description': '', 'entityID': eid, 'parentId': chain[-1]}
            chain.append(self.assertOk(self.api.req('POST', '/api/skills?' + self.api.auth(owner),
                                                    body), 201)['data']['id'])
        self.assertOk(self.put_level(owner, eid, 'L', [chain[0]], [3]), 201)
        self.award_ok(owner, eid, self.contrib(member.address, [chain[-1], chain[4]], [2, 1]))
        base = []
        for _ in range(3):
            t0 = time.monotonic()
            self.prog(owner, eid, member.address)
            base.append(time.monotonic() - t0)
        # One round trip takes `delay`, two take twice it: the bound tells them apart with
        # `delay` to spare for a loaded machine.
        delay = 1.0
        p.delay(int(delay * 1000))
        try:
            t0 = time.monotonic()
            got = self.prog(owner, eid, member.address)
            took = time.monotonic() - t0
        finally:
            p.release()
        self.assertEqual((got['skills'][0]['total'], got['levels'][0]['reached']), (3, True))
        self.assertGreaterEqual(took, delay * 0.9, 'the delay did not apply')
        self.assertLess(took, 2 * delay + min(base) * 2,
                        'progress took %.3fs with replies held %.1fs: more than one round trip '
                        '(base %.3fs)' % (took, delay, min(base)))


if __name__ == '__main__':
    harness.main()
