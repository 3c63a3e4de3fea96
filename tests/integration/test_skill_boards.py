"""Skill trees, the boards (CONTRACT section 15): `GET …/leaderboard?by=<skillId>` ranks by the
member's total (own score plus the totals of the skill's children). An award to a skill moves
the member on the board of that skill and of every ancestor, in one write; a revocation takes
its scores back from every total; totals stay at most 2^53 - 1 (409 as for scores); removals,
the sweeper and force-add find and move the same entries; a flat entity writes no totals.
Moving a branch, or deleting a leaf with scores, rebuilds the boards above the old and the new
place in the background (the sweeper's steps, under a lease in Redis), and those boards answer
"rebuilding":true until exact; awards landing meanwhile leave no total off once it ends; a
rebuild whose instance is killed (SIGKILL) half-way is finished by another instance.
Every board is checked against totals recomputed from the own scores (the contributions) and
the tree, through the API and over every key (invariants.py)."""

import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from invariants import check_invariants  # noqa: E402
from test_progression import Api, ProgressionBase  # noqa: E402

WALLETS = 60
DEPTH_MAX = 8
MAX_VALUE = 2 ** 53 - 1


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def rand_addr():
    return '0x' + os.urandom(20).hex()


class SkillBoardsBase(ProgressionBase):
    """Helpers: a tree of skills, the totals recomputed from the contributions, the boards."""

    def new_skill(self, w, eid, name, parent=None):
        body = {'name': name, 'description': '', 'entityID': eid}
        if parent is not None:
            body['parentId'] = parent
        return self.assertOk(self.api.req('POST', '/api/skills?' + self.api.auth(w), body),
                             201)['data']['id']

    def chain(self, w, eid, depth=DEPTH_MAX):
        """Skills root … depth, each the child of the one before."""
        out = [self.new_skill(w, eid, 'Depth 0')]
        for d in range(1, depth + 1):
            out.append(self.new_skill(w, eid, 'Depth %d' % d, parent=out[-1]))
        return out

    def parents(self, w, eid):
        skills = self.assertOk(self.api.req('GET', '/api/skills?entityID=%s&%s' %
                                            (eid, self.api.auth(w))))['data']['skills']
        return {s['id']: s['parentId'] for s in skills}

    def totals(self, w, eid, members):
        """member -> skill -> total, from the non-revoked contributions and the tree now."""
        parent = self.parents(w, eid)
        out = {}
        for m in members:
            t = {}
            for c in self.all_contributions(w, eid, m):
                if c['revoked']:
                    continue
                for s in c['skills']:
                    at, hops = s['skillId'], 0
                    if at not in parent:
                        continue  # a deleted skill counts nowhere
                    while at is not None and hops <= DEPTH_MAX + 1:
                        t[at] = t.get(at, 0) + s['score']
                        at, hops = parent.get(at), hops + 1
            out[m] = t
        return out

    def board_map(self, w, eid, sid):
        return {e['member']: e['value'] for e in self.board(w, eid, sid)}

    def board_problems(self, w, eid, members):
        """Every skill's board through the API against the totals recomputed."""
        want = self.totals(w, eid, members)
        problems = []
        for sid in self.parents(w, eid):
            exp = {m: t[sid] for m, t in want.items() if t.get(sid, 0) > 0}
            got = self.board_map(w, eid, sid)
            if got != exp:
                problems.append('board %s: %r, the totals say %r' % (sid, got, exp))
            # ranks: competition ranking by value, ties by address
            entries = self.board(w, eid, sid)
            vals = [e['value'] for e in entries]
            if vals != sorted(vals, reverse=True):
                problems.append('board %s not ordered: %r' % (sid, vals))
        return problems

    def assertBoardsExact(self, w, eid, members):
        self.assertEqual(self.board_problems(w, eid, members), [])
        self.assertEqual(check_invariants(self.r), [])

    def rebuilding(self, eid):
        return sorted(text(x) for x in
                      self.r.cli('SMEMBERS', 'ent:{%s}:lb:rebuild:boards' % eid) or [])

    def wait_rebuilt(self, eid, timeout=90):
        harness.wait_for(lambda: not self.r.cli('EXISTS', 'ent:{%s}:lb:rebuild:boards' % eid)
                         and not self.r.cli('EXISTS', 'ent:{%s}:lb:rebuild' % eid),
                         harness.scaled(timeout), interval=0.05,
                         what='the boards of %s rebuilt' % eid)

    def sweeper(self, **env):
        """An instance whose sweeper looks for work often (the class's is held off)."""
        e = {'SWEEP_POLL_MS': '50'}
        e.update(env)
        return self.entityd(redis=self.r, env=e)

    def move(self, w, eid, sid, parent, api=None):
        api = api or self.api
        return self.assertOk(api.req('POST', '/api/entities/%s/skills/%s/update?%s' %
                                     (eid, sid, api.auth(w)), {'parentId': parent}))['data']

    def page(self, w, eid, by):
        return self.assertOk(self.api.leaderboard(w, eid, by))

    def prog_fields(self, eid, addr):
        flat = self.r.cli('HGETALL', 'ent:{%s}:prog:%s' % (eid, addr)) or []
        return {text(flat[i]): text(flat[i + 1]) for i in range(0, len(flat), 2)}


class SkillBoardsTest(SkillBoardsBase):
    """One Redis and one entityd for the class; each test its own entity."""

    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.r = cls.class_redis()
        # its sweeper held off: a rebuild waits for the instances a test starts (sweeper())
        cls.svc = cls.class_entityd(redis=cls.r, env={'SWEEP_PAUSED': 'true'})
        cls.api = Api(cls.svc.port)

    def entity_with_members(self, n):
        owner, *ms = self.wallets(1 + n)
        eid = self.create_entity(owner)
        self.add_members(owner, eid, *[m.address for m in ms])
        return owner, eid, [m.address for m in ms]

    def test_depth_8_award_moves_every_ancestor_and_revocation_takes_back(self):
        owner, eid, ms = self.entity_with_members(3)
        chain = self.chain(owner, eid)
        self.assertEqual(len(chain), DEPTH_MAX + 1)
        a, b, c = ms
        deep = self.award_ok(owner, eid, self.contrib(a, [chain[-1]], [7]))
        # one award at depth 8 lists the member on all nine boards at 7
        for sid in chain:
            self.assertEqual(self.board_map(owner, eid, sid), {a: 7}, sid)
        self.award_ok(owner, eid, self.contrib(b, [chain[3]], [5]))
        self.award_ok(owner, eid, self.contrib(c, [chain[0]], [6]))
        self.award_ok(owner, eid, self.contrib(b, [chain[5]], [4]))
        # root: a 7, b 9, c 6; depth 3: a 7, b 9; depth 4 and 5: a 7, b 4
        self.assertEqual([(e['member'], e['value']) for e in self.board(owner, eid, chain[0])],
                         [(b, 9), (a, 7), (c, 6)])
        self.assertEqual(self.board_map(owner, eid, chain[4]), {a: 7, b: 4})
        self.assertEqual(self.board_map(owner, eid, chain[6]), {a: 7})
        self.assertBoardsExact(owner, eid, ms)
        # the revocation takes the 7 back from every total
        self.assertOk(self.api.revoke(owner, eid, deep['id'], {'reason': 'undo'}))
        for sid in chain[6:]:
            self.assertEqual(self.board_map(owner, eid, sid), {}, sid)
        self.assertEqual(self.board_map(owner, eid, chain[0]), {b: 9, c: 6})
        self.assertBoardsExact(owner, eid, ms)

    def test_one_award_under_one_parent_twice_and_batches(self):
        owner, eid, ms = self.entity_with_members(4)
        root = self.new_skill(owner, eid, 'Engineering')
        back = self.new_skill(owner, eid, 'Backend', parent=root)
        rust = self.new_skill(owner, eid, 'Rust', parent=back)
        go = self.new_skill(owner, eid, 'Go', parent=back)
        front = self.new_skill(owner, eid, 'Frontend', parent=root)
        # two skills under one parent in one contribution, and the parent itself
        self.award_ok(owner, eid, self.contrib(ms[0], [rust, go, back], [3, 4, 5]))
        self.assertEqual(self.board_map(owner, eid, back), {ms[0]: 12})
        self.assertEqual(self.board_map(owner, eid, root), {ms[0]: 12})
        # a batch naming one member several times, and members once each
        body = {'contributions': [
            self.contrib(ms[1], [rust], [2]), self.contrib(ms[0], [front], [1]),
            self.contrib(ms[1], [go, front], [2, 2]), self.contrib(ms[2], [root], [20]),
            self.contrib(ms[3], [rust, go], [1, 1])]}
        self.award_ok(owner, eid, body)
        self.assertEqual(self.board_map(owner, eid, root),
                         {ms[0]: 13, ms[1]: 6, ms[2]: 20, ms[3]: 2})
        self.assertEqual(self.board_map(owner, eid, back), {ms[0]: 12, ms[1]: 4, ms[3]: 2})
        self.assertBoardsExact(owner, eid, ms)

    def test_random_awards_and_revocations_keep_every_total(self):
        owner, eid, ms = self.entity_with_members(6)
        rnd = random.Random(52)
        skills = [self.new_skill(owner, eid, 'S0')]
        for i in range(1, 14):
            skills.append(self.new_skill(owner, eid, 'S%d' % i, parent=rnd.choice(
                skills[max(0, i - 4):] + [None])))
        done = []
        for _ in range(40):
            k = rnd.randint(1, 3)
            body = {'contributions': [self.contrib(rnd.choice(ms), rnd.sample(skills, 2),
                                                   [rnd.randint(1, 9), rnd.randint(1, 9)])
                                      for _ in range(k)]}
            done.extend(self.award_ok(owner, eid, body))
            if rnd.random() < 0.3:
                self.assertOk(self.api.revoke(owner, eid, done.pop(rnd.randrange(len(done)))['id'],
                                              {'reason': 'r'}))
        self.assertBoardsExact(owner, eid, ms)

    def test_total_bound_covers_the_ancestors(self):
        owner, eid, ms = self.entity_with_members(1)
        m, = ms
        root = self.new_skill(owner, eid, 'Root')
        leaf = self.new_skill(owner, eid, 'Leaf', parent=root)
        # seeded as many awards would have left it (a score is at most 1000000 an award)
        self.r.cli('HSET', 'ent:{%s}:prog:%s' % (eid, m), 's:' + root, str(MAX_VALUE - 10))
        self.award_ok(owner, eid, self.contrib(m, [root], [5]))
        before = self.prog_fields(eid, m)
        # the leaf's own score would be 6, the root's total past 2^53 - 1
        resp = self.api.award(owner, eid, self.contrib(m, [leaf], [6]))
        err = self.assertEnvelope(resp, 409, 'conflict', field='skills[0].score')
        self.assertIn('9007199254740991', err['message'])
        self.assertEqual(self.prog_fields(eid, m), before)
        self.assertEqual(self.board_map(owner, eid, leaf), {})
        # in a batch, named at the contribution that passes it; nothing written
        resp = self.api.award(owner, eid, {'contributions': [
            self.contrib(m, [leaf], [3]), self.contrib(m, [leaf], [3])]})
        self.assertEnvelope(resp, 409, 'conflict', field='contributions[1].skills[0].score')
        self.assertEqual(self.prog_fields(eid, m), before)
        self.award_ok(owner, eid, self.contrib(m, [leaf], [5]))
        self.assertEqual(self.board_map(owner, eid, root), {m: MAX_VALUE})
        self.assertEqual(self.board_map(owner, eid, leaf), {m: 5})
        f = self.prog_fields(eid, m)
        self.assertEqual((f['s:' + root], f['t:' + root]), (str(MAX_VALUE - 5), str(MAX_VALUE)))

    def test_removal_sweep_and_force_add_move_the_same_entries(self):
        owner, eid, ms = self.entity_with_members(3)
        chain = self.chain(owner, eid, depth=3)
        a, b, c = ms
        ca = self.award_ok(owner, eid, self.contrib(a, [chain[3], chain[1]], [4, 2]))
        self.award_ok(owner, eid, self.contrib(b, [chain[2]], [3]))
        self.award_ok(owner, eid, self.contrib(c, [chain[3]], [1]))
        # a removed: off every board at once (reads skip it), swept from the keys later
        self.assertOk(self.api.req('POST', '/api/entities/%s/members/remove?%s' %
                                   (eid, self.api.auth(owner)), {'addresses': [a]}))
        self.assertEqual(self.board_map(owner, eid, chain[0]), {b: 3, c: 1})
        self.sweeper()
        harness.wait_for(lambda: not self.r.cli('SMEMBERS', 'ent:{%s}:lb:unswept' % eid),
                         harness.scaled(30), what='the sweep')
        for sid in chain:
            entries = [text(e) for e in self.r.cli('ZRANGE', 'ent:{%s}:lb:s:%s' % (eid, sid),
                                                   0, -1)]
            self.assertFalse([e for e in entries if e.endswith(a)], sid)
        self.assertEqual(check_invariants(self.r), [])
        # a revocation while removed moves its totals, and a force-add lists it at them
        self.assertOk(self.api.revoke(owner, eid, ca['id'], {'reason': 'r'}))
        self.award_ok(owner, eid, self.contrib(b, [chain[3]], [1]))
        self.add_members(owner, eid, a)
        self.assertBoardsExact(owner, eid, ms)
        self.award_ok(owner, eid, self.contrib(a, [chain[3]], [9]))
        self.assertEqual(self.board_map(owner, eid, chain[0]), {a: 9, b: 4, c: 1})
        # removed and added back before the sweep: the entries waiting come back once each
        self.assertOk(self.api.req('POST', '/api/entities/%s/members/remove?%s' %
                                   (eid, self.api.auth(owner)), {'addresses': [b]}))
        self.add_members(owner, eid, b)
        self.assertBoardsExact(owner, eid, ms)

    def test_removed_while_a_tree_turns_flat_comes_back_once(self):
        owner, eid, ms = self.entity_with_members(2)
        root = self.new_skill(owner, eid, 'Root')
        leaf = self.new_skill(owner, eid, 'Leaf', parent=root)
        self.award_ok(owner, eid, self.contrib(ms[0], [leaf, root], [3, 2]))
        self.assertEqual(self.board_map(owner, eid, root), {ms[0]: 5})
        self.assertOk(self.api.req('POST', '/api/entities/%s/members/remove?%s' %
                                   (eid, self.api.auth(owner)), {'addresses': [ms[0]]}))
        # the tree made flat, rebuilt (a removed member is not visited), then the member back
        self.move(owner, eid, leaf, None)
        self.sweeper(SWEEP_STEP_ENTRIES='1000')
        self.wait_rebuilt(eid)
        self.add_members(owner, eid, ms[0])
        self.assertEqual(self.board_map(owner, eid, root), {ms[0]: 2})
        entries = [text(e) for e in self.r.cli('ZRANGE', 'ent:{%s}:lb:s:%s' % (eid, root), 0, -1)]
        self.assertEqual(len(entries), 1, entries)
        self.assertBoardsExact(owner, eid, ms)

    def test_flat_entity_writes_no_totals(self):
        owner, eid, ms = self.entity_with_members(2)
        s1 = self.new_skill(owner, eid, 'One')
        s2 = self.new_skill(owner, eid, 'Two')
        self.award_ok(owner, eid, self.contrib(ms[0], [s1, s2], [3, 4]))
        self.award_ok(owner, eid, {'contributions': [self.contrib(ms[1], [s1], [5]),
                                                     self.contrib(ms[1], [s1], [1])]})
        for m in ms:
            self.assertFalse([f for f in self.prog_fields(eid, m) if f.startswith('t:')])
        self.assertEqual(self.board_map(owner, eid, s1), {ms[0]: 3, ms[1]: 6})
        # a tree's skills keep their totals apart from their own scores
        leaf = self.new_skill(owner, eid, 'Leaf', parent=s1)
        self.award_ok(owner, eid, self.contrib(ms[0], [leaf], [2]))
        f = self.prog_fields(eid, ms[0])
        self.assertEqual((f.get('s:' + s1), f.get('t:' + s1), f.get('t:' + leaf)),
                         ('3', '5', None))
        self.assertBoardsExact(owner, eid, ms)

    # --- moves and deletions: the rebuild ---

    def test_move_answers_rebuilding_until_exact(self):
        owner, eid, ms = self.entity_with_members(4)
        eng = self.new_skill(owner, eid, 'Engineering')
        back = self.new_skill(owner, eid, 'Backend', parent=eng)
        rust = self.new_skill(owner, eid, 'Rust', parent=back)
        deep = self.new_skill(owner, eid, 'Tokio', parent=rust)
        ops = self.new_skill(owner, eid, 'Operations')
        self.award_ok(owner, eid, {'contributions': [
            self.contrib(ms[0], [deep], [5]), self.contrib(ms[1], [rust, back], [3, 1]),
            self.contrib(ms[2], [eng], [2]), self.contrib(ms[3], [ops], [4])]})
        for by in (eng, back, rust, ops):
            self.assertNotIn('rebuilding', self.page(owner, eid, by))
        self.move(owner, eid, rust, ops)
        self.assertEqual(self.rebuilding(eid), sorted([eng, back, ops]))
        for by in (eng, back, ops):
            self.assertIs(self.page(owner, eid, by)['rebuilding'], True, by)
        # the moved branch's own boards do not change
        for by in (rust, deep):
            self.assertNotIn('rebuilding', self.page(owner, eid, by))
        # awards land meanwhile, on the tree as it is now
        self.award_ok(owner, eid, self.contrib(ms[0], [deep], [2]))
        self.award_ok(owner, eid, self.contrib(ms[2], [back], [6]))
        sweeper = self.sweeper()
        self.wait_rebuilt(eid)
        for by in (eng, back, ops, rust):
            self.assertNotIn('rebuilding', self.page(owner, eid, by))
        self.assertEqual(self.board_map(owner, eid, ops),
                         {ms[0]: 7, ms[1]: 3, ms[3]: 4})
        self.assertEqual(self.board_map(owner, eid, eng), {ms[1]: 1, ms[2]: 8})
        self.assertBoardsExact(owner, eid, ms)
        # made a root: its old place's boards rebuilt again (with no sweeper running, so
        # the rebuild cannot end before the page is read)
        self.assertEqual(sweeper.stop(), 0)
        self.move(owner, eid, rust, None)
        self.assertIs(self.page(owner, eid, ops)['rebuilding'], True)
        self.sweeper()
        self.wait_rebuilt(eid)
        self.assertEqual(self.board_map(owner, eid, ops), {ms[3]: 4})
        self.assertBoardsExact(owner, eid, ms)

    def test_deleting_a_leaf_with_scores_rebuilds_above(self):
        owner, eid, ms = self.entity_with_members(2)
        eng = self.new_skill(owner, eid, 'Engineering')
        back = self.new_skill(owner, eid, 'Backend', parent=eng)
        rust = self.new_skill(owner, eid, 'Rust', parent=back)
        self.award_ok(owner, eid, {'contributions': [
            self.contrib(ms[0], [rust], [5]), self.contrib(ms[1], [rust, eng], [3, 1])]})
        self.assertEqual(self.board_map(owner, eid, eng), {ms[0]: 5, ms[1]: 4})
        self.assertOk(self.api.req('DELETE', '/api/entities/%s/skills/%s?%s' %
                                   (eid, rust, self.api.auth(owner))))
        self.assertEqual(self.rebuilding(eid), sorted([eng, back]))
        self.assertIs(self.page(owner, eid, eng)['rebuilding'], True)
        self.sweeper()
        self.wait_rebuilt(eid)
        self.assertEqual(self.board_map(owner, eid, eng), {ms[1]: 1})
        self.assertEqual(self.board_map(owner, eid, back), {})
        self.assertBoardsExact(owner, eid, ms)

    def test_branch_moved_under_load(self):
        owner, eid, ms = self.entity_with_members(8)
        p1 = self.new_skill(owner, eid, 'P1')
        p2 = self.new_skill(owner, eid, 'P2')
        q = self.new_skill(owner, eid, 'Q', parent=p2)
        x = self.new_skill(owner, eid, 'X', parent=p1)
        y = self.new_skill(owner, eid, 'Y', parent=x)
        z = self.new_skill(owner, eid, 'Z', parent=q)
        skills = [p1, p2, q, x, y, z]
        self.sweeper(SWEEP_PAUSE_MS='5')
        stop, errors, landed = threading.Event(), [], [0]
        api = Api(self.svc.port)

        def awards(seed):
            rnd = random.Random(seed)
            while not stop.is_set() and len(errors) < 5:
                body = {'contributions': [self.contrib(rnd.choice(ms), rnd.sample(skills, 2),
                                                       [rnd.randint(1, 9), rnd.randint(1, 9)])
                                          for _ in range(rnd.randint(1, 4))]}
                st, _, b = api.award(owner, eid, body)
                if st != 201:
                    errors.append((st, b))
                landed[0] += 1

        threads = [threading.Thread(target=awards, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        try:
            places = [(x, p2), (z, y), (x, q), (z, p1), (x, None), (x, p1), (z, q)]
            for sid, parent in places:
                harness.wait_for(lambda n=landed[0]: landed[0] >= n + 3, harness.scaled(30),
                                 what='awards landing')
                self.move(owner, eid, sid, parent)
            harness.wait_for(lambda n=landed[0]: landed[0] >= n + 5, harness.scaled(30),
                             what='awards landing')
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.wait_rebuilt(eid)
        self.assertBoardsExact(owner, eid, ms)

    def test_rebuild_killed_half_way_finished_by_another_instance(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        ms = [rand_addr() for _ in range(300)]
        self.add_members(owner, eid, *ms)
        eng = self.new_skill(owner, eid, 'Engineering')
        back = self.new_skill(owner, eid, 'Backend', parent=eng)
        rust = self.new_skill(owner, eid, 'Rust', parent=back)
        ops = self.new_skill(owner, eid, 'Operations')
        for i in range(0, len(ms), 100):
            self.award_ok(owner, eid, {'contributions': [
                self.contrib(m, [rust], [1 + j % 7]) for j, m in enumerate(ms[i:i + 100])]})
        # one member a step, a pause between steps: the rebuild takes a few seconds
        slow = self.sweeper(BOARD_REBUILD_STEP_ENTRIES='4', SWEEP_PAUSE_MS='20',
                            BOARD_REBUILD_LEASE_MS='1000')
        self.move(owner, eid, rust, ops, api=Api(slow.port))
        key = 'ent:{%s}:lb:rebuild' % eid
        harness.wait_for(lambda: text(self.r.cli('HGET', key, 'cursor') or b'0') != '0',
                         harness.scaled(30), interval=0.01, what='the rebuild under way')
        slow.kill()
        self.assertEqual(self.rebuilding(eid), sorted([eng, back, ops]))
        held = text(self.r.cli('HGET', key, 'lease'))
        self.assertTrue(held)
        self.assertIs(self.page(owner, eid, eng)['rebuilding'], True)
        # another instance finds the entity listed and, once the lease ran out, finishes
        self.sweeper()
        self.wait_rebuilt(eid)
        self.assertEqual(self.board_map(owner, eid, eng), {})
        self.assertEqual(len(self.board_map(owner, eid, ops)), len(ms))
        self.assertEqual(check_invariants(self.r), [])
        for m in ms:
            f = self.prog_fields(eid, m)
            self.assertEqual((f.get('t:' + eng), f.get('t:' + back), f.get('t:' + ops)),
                             (None, None, f['s:' + rust]), m)


if __name__ == '__main__':
    harness.main()
