"""Skill trees, the skill side (CONTRACT section 15): parentId and parentIds at creation,
parentId in update (null makes a root), cycles and depth past 8 refused naming them, unknown or
foreign parents refused, deleting a skill with children refused naming them, every Skill with
parentId and depth, op 5 in pre-order, the skill.moved event, the progression template's S
lines carrying each skill's parent, and an entity of an earlier release (Skill JSONs without
parentId) read and awarded unchanged."""

import json
import os
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from test_progression import Api, ProgressionBase  # noqa: E402

WALLETS = 60
DEPTH_MAX = 8


def fake_skill_id():
    return 's-' + str(uuid.uuid4())


def text(v):
    return v.decode() if isinstance(v, bytes) else v


class SkillTreeTest(ProgressionBase):
    """One Redis and one entityd for the class; each test its own entity."""

    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r)
        cls.api = Api(cls.svc.port)

    # --- helpers ---

    def new(self, w, eid, name, parent=None, status=201, **extra):
        body = {'name': name, 'description': '', 'entityID': eid}
        if parent is not None:
            body['parentId'] = parent
        body.update(extra)
        resp = self.api.req('POST', '/api/skills?' + self.api.auth(w), body)
        return self.assertOk(resp, status)['data'] if status == 201 else resp

    def many(self, w, eid, names, parents=None):
        body = {'names': names, 'entityID': eid}
        if parents is not None:
            body['parentIds'] = parents
        return self.api.req('POST', '/api/skills/multiple?' + self.api.auth(w), body)

    def move(self, w, eid, sid, body):
        return self.api.req('POST', '/api/entities/%s/skills/%s/update?%s' %
                            (eid, sid, self.api.auth(w)), body)

    def delete(self, w, eid, sid):
        return self.api.req('DELETE', '/api/entities/%s/skills/%s?%s' %
                            (eid, sid, self.api.auth(w)))

    def tree(self, w, eid):
        return self.assertOk(self.api.req('GET', '/api/skills?entityID=%s&%s' %
                                          (eid, self.api.auth(w))))['data']

    def listing(self, w, eid):
        """[(id, parentId, depth)] in op 5's order."""
        return [(s['id'], s['parentId'], s['depth']) for s in self.tree(w, eid)['skills']]

    def s_lines(self, eid):
        tpl = text(self.r.cli('HGET', 'ent:{%s}' % eid, 'progtpl')) or ''
        return [ln.split('\t') for ln in tpl.split('\n') if ln.startswith('S\t')]

    def events_of(self, w, eid, etype):
        return [e['data'] for e in self.all_events(w, eid) if e['type'] == etype]

    def owner_entity(self):
        owner, = self.wallets(1)
        return owner, self.create_entity(owner)

    # --- creation ---

    def test_create_under_parents_to_depth_8_and_no_deeper(self):
        owner, eid = self.owner_entity()
        root = self.new(owner, eid, 'Engineering')
        self.assertEqual((root['parentId'], root['depth']), (None, 0))
        chain = [root]
        for d in range(1, DEPTH_MAX + 1):
            s = self.new(owner, eid, 'Depth %d' % d, parent=chain[-1]['id'])
            self.assertEqual((s['parentId'], s['depth']), (chain[-1]['id'], d))
            chain.append(s)
        before = self.tree(owner, eid)
        err = self.assertEnvelope(self.new(owner, eid, 'Too deep', parent=chain[-1]['id'],
                                           status=409), 409, 'conflict', field='parentId')
        self.assertIn(str(DEPTH_MAX), err['message'])
        # Nothing added: the tree is as before, and the name is still free.
        self.assertEqual(self.tree(owner, eid), before)
        self.new(owner, eid, 'Too deep', parent=chain[-2]['id'])
        # Every Skill object of op 5 is the one the creation answered.
        got = {s['id']: s for s in self.tree(owner, eid)['skills']}
        for s in chain:
            self.assertEqual(got[s['id']], s)

    def test_create_parent_unknown_foreign_or_malformed_is_400(self):
        owner, eid = self.owner_entity()
        other = self.create_entity(owner)
        foreign = self.new(owner, other, 'Elsewhere')['id']
        for bad in (fake_skill_id(), foreign):
            self.assertEnvelope(self.new(owner, eid, 'Child', parent=bad, status=400), 400,
                                'invalid_request', field='parentId')
        for bad in ('s-nope', 5, ['x'], {'id': foreign}, ''):
            self.assertEnvelope(self.new(owner, eid, 'Child', parent=bad, status=400), 400,
                                'invalid_request', field='parentId')
        self.assertEqual(self.tree(owner, eid)['skills'], [])
        # null is a root, as an absent parentId.
        s = self.new(owner, eid, 'Root', parentId=None)
        self.assertEqual((s['parentId'], s['depth']), (None, 0))

    def test_create_several_with_parent_ids_in_every_form(self):
        owner, eid = self.owner_entity()
        top = self.new(owner, eid, 'Backend')
        mid = self.new(owner, eid, 'Languages', parent=top['id'])
        # A JSON array, with null for a root.
        st, _, body = self.many(owner, eid, ['Rust', 'Ops', 'Go'],
                                [mid['id'], None, mid['id']])
        self.assertEqual(st, 201, body)
        self.assertEqual([(s['name'], s['parentId'], s['depth']) for s in body['data']],
                         [('Rust', mid['id'], 2), ('Ops', None, 0), ('Go', mid['id'], 2)])
        # A string holding the array, as names may be given.
        st, _, body = self.many(owner, eid, json.dumps(['Linux']), json.dumps([top['id']]))
        self.assertEqual(st, 201, body)
        self.assertEqual((body['data'][0]['parentId'], body['data'][0]['depth']),
                         (top['id'], 1))
        # Without parentIds every one is a root.
        st, _, body = self.many(owner, eid, ['Design'])
        self.assertEqual((st, body['data'][0]['parentId']), (201, None), body)
        listed = self.listing(owner, eid)
        ids = {s['name']: s['id'] for s in self.tree(owner, eid)['skills']}
        self.assertEqual(listed, [
            (top['id'], None, 0), (mid['id'], top['id'], 1), (ids['Rust'], mid['id'], 2),
            (ids['Go'], mid['id'], 2), (ids['Linux'], top['id'], 1), (ids['Ops'], None, 0),
            (ids['Design'], None, 0)])

    def test_create_several_refusals_are_all_or_nothing(self):
        owner, eid = self.owner_entity()
        other = self.create_entity(owner)
        foreign = self.new(owner, other, 'Elsewhere')['id']
        chain = [self.new(owner, eid, 'Root')]
        for d in range(1, DEPTH_MAX + 1):
            chain.append(self.new(owner, eid, 'D%d' % d, parent=chain[-1]['id']))
        before = self.tree(owner, eid)
        root = chain[0]['id']
        self.assertField(self.many(owner, eid, ['a', 'b'], [root]), 'parentIds')
        self.assertField(self.many(owner, eid, ['a', 'b'], 'nope'), 'parentIds')
        self.assertField(self.many(owner, eid, ['a', 'b'], [root, 's-bad']), 'parentIds[1]')
        self.assertField(self.many(owner, eid, ['a', 'b'], [root, 7]), 'parentIds[1]')
        self.assertField(self.many(owner, eid, ['a', 'b'], [root, fake_skill_id()]),
                         'parentIds[1]')
        self.assertField(self.many(owner, eid, ['a', 'b', 'c'], [None, root, foreign]),
                         'parentIds[2]')
        self.assertEnvelope(self.many(owner, eid, ['a', 'b'], [root, chain[-1]['id']]), 409,
                            'conflict', field='parentIds[1]')
        self.assertEqual(self.tree(owner, eid), before)
        self.assertEqual(self.events_of(owner, eid, 'skill.added'),
                         [{'ids': [s['id']]} for s in chain])

    # --- op 5: parents before children ---

    def test_listing_is_a_preorder_walk_with_siblings_in_creation_order(self):
        owner, eid = self.owner_entity()
        r1 = self.new(owner, eid, 'r1')['id']
        r2 = self.new(owner, eid, 'r2')['id']
        c1 = self.new(owner, eid, 'c1', parent=r2)['id']
        c2 = self.new(owner, eid, 'c2', parent=r1)['id']
        g1 = self.new(owner, eid, 'g1', parent=c1)['id']
        r3 = self.new(owner, eid, 'r3')['id']
        c3 = self.new(owner, eid, 'c3', parent=r1)['id']
        g2 = self.new(owner, eid, 'g2', parent=c2)['id']
        want = [(r1, None, 0), (c2, r1, 1), (g2, c2, 2), (c3, r1, 1), (r2, None, 0),
                (c1, r2, 1), (g1, c1, 2), (r3, None, 0)]
        self.assertEqual(self.listing(owner, eid), want)
        # The progression template lists the skills in the same order, each with its parent.
        self.assertEqual([(ln[1], ln[3] or None) for ln in self.s_lines(eid)],
                         [(i, p) for i, p, _ in want])
        self.assertEqual([ln[2] for ln in self.s_lines(eid)][:2], ['"r1"', '"c2"'])
        # Progress lists a member's skills in that order too, with their names.
        member, = self.wallets(1)
        self.add_members(owner, eid, member.address)
        self.award_ok(owner, eid, self.contrib(member.address, [r3, g1, r1, g2],
                                               [1, 2, 3, 4]))
        p = self.prog(owner, eid, member.address)
        # (each skill with a total above 0: its own score and its branch's, CONTRACT section 15)
        self.assertEqual([(s['skillId'], s['name'], s['score'], s['total'])
                          for s in p['skills']],
                         [(r1, 'r1', 3, 7), (c2, 'c2', 0, 4), (g2, 'g2', 4, 4),
                          (r2, 'r2', 0, 2), (c1, 'c1', 0, 2), (g1, 'g1', 2, 2),
                          (r3, 'r3', 1, 1)])

    # --- moving ---

    def test_move_under_another_parent_and_back_to_root(self):
        owner, eid = self.owner_entity()
        eng = self.new(owner, eid, 'Engineering')['id']
        back = self.new(owner, eid, 'Backend')['id']
        rust = self.new(owner, eid, 'Rust', parent=back)['id']
        tokio = self.new(owner, eid, 'Tokio', parent=rust)['id']
        s = self.assertOk(self.move(owner, eid, back, {'parentId': eng}))['data']
        self.assertEqual((s['id'], s['name'], s['parentId'], s['depth']),
                         (back, 'Backend', eng, 1))
        # The branch moved with it: each skill below is one deeper.
        self.assertEqual(self.listing(owner, eid), [
            (eng, None, 0), (back, eng, 1), (rust, back, 2), (tokio, rust, 3)])
        self.assertEqual(self.tree(owner, eid)['skills'][1], s)
        self.assertEqual([ln[3] for ln in self.s_lines(eid)], ['', eng, back, rust])
        # null makes a root again; the branch comes up with it.
        s = self.assertOk(self.move(owner, eid, rust, {'parentId': None}))['data']
        self.assertEqual((s['parentId'], s['depth']), (None, 0))
        self.assertEqual(self.listing(owner, eid), [
            (eng, None, 0), (back, eng, 1), (rust, None, 0), (tokio, rust, 1)])
        # The same parent again, or a rename alone, is no move.
        self.assertOk(self.move(owner, eid, tokio, {'parentId': rust}))
        self.assertOk(self.move(owner, eid, tokio, {'name': 'Tokio rt'}))
        # A rename and a move at once: one event of each.
        s = self.assertOk(self.move(owner, eid, tokio, {'name': 'Async', 'parentId': back}))
        self.assertEqual((s['data']['name'], s['data']['parentId'], s['data']['depth']),
                         ('Async', back, 2))
        self.assertEqual(self.events_of(owner, eid, 'skill.moved'), [
            {'id': back, 'from': None, 'to': eng}, {'id': rust, 'from': back, 'to': None},
            {'id': tokio, 'from': rust, 'to': back}])
        self.assertEqual(self.events_of(owner, eid, 'skill.updated'), [
            {'id': tokio, 'changed': ['name']}, {'id': tokio, 'changed': ['name']}])

    def test_move_that_closes_a_cycle_is_409_naming_it(self):
        owner, eid = self.owner_entity()
        a = self.new(owner, eid, 'a')['id']
        b = self.new(owner, eid, 'b', parent=a)['id']
        c = self.new(owner, eid, 'c', parent=b)['id']
        before = self.tree(owner, eid)
        err = self.assertEnvelope(self.move(owner, eid, a, {'parentId': c}), 409, 'conflict',
                                  field='parentId')
        self.assertIn(' -> '.join([a, c, b, a]), err['message'])
        err = self.assertEnvelope(self.move(owner, eid, b, {'parentId': b}), 409, 'conflict',
                                  field='parentId')
        self.assertIn(' -> '.join([b, b]), err['message'])
        # Refused with a name change too: nothing changed, no event.
        self.assertEnvelope(self.move(owner, eid, a, {'parentId': b, 'name': 'z'}), 409,
                            'conflict', field='parentId')
        self.assertEqual(self.tree(owner, eid), before)
        self.assertEqual(self.events_of(owner, eid, 'skill.moved'), [])
        self.assertEqual(self.events_of(owner, eid, 'skill.updated'), [])

    def test_move_past_depth_8_unknown_or_foreign_parent_refused(self):
        owner, eid = self.owner_entity()
        other = self.create_entity(owner)
        foreign = self.new(owner, other, 'Elsewhere')['id']
        chain = [self.new(owner, eid, 'Root')['id']]
        for d in range(1, DEPTH_MAX - 1):  # depths 0..6
            chain.append(self.new(owner, eid, 'D%d' % d, parent=chain[-1])['id'])
        branch = self.new(owner, eid, 'Branch')['id']
        leaf = self.new(owner, eid, 'Leaf', parent=branch)['id']
        before = self.tree(owner, eid)
        # Under depth 6 the branch's leaf would be at 8: allowed; under 7 at 9: refused.
        deeper = self.new(owner, eid, 'D7', parent=chain[-1])['id']
        err = self.assertEnvelope(self.move(owner, eid, branch, {'parentId': deeper}), 409,
                                  'conflict', field='parentId')
        self.assertIn('9', err['message'])
        for bad in (fake_skill_id(), foreign):
            self.assertEnvelope(self.move(owner, eid, branch, {'parentId': bad}), 400,
                                'invalid_request', field='parentId')
        for bad in ('s-bad', 3, '', ['x']):
            self.assertEnvelope(self.move(owner, eid, branch, {'parentId': bad}), 400,
                                'invalid_request', field='parentId')
        self.assertOk(self.delete(owner, eid, deeper))
        self.assertEqual(self.tree(owner, eid), before)
        s = self.assertOk(self.move(owner, eid, branch, {'parentId': chain[-1]}))['data']
        self.assertEqual(s['depth'], DEPTH_MAX - 1)
        self.assertIn((leaf, branch, DEPTH_MAX), self.listing(owner, eid))
        self.assertEnvelope(self.move(owner, eid, fake_skill_id(), {'parentId': None}), 404,
                            'not_found')

    def assertTreeSound(self, w, eid):
        """Every skill's depth is its parent's plus one (0 for a root), and op 5 lists each
        parent before its children: no cycle, no stale depth."""
        seen = {}
        for sid, parent, depth in self.listing(w, eid):
            if parent is None:
                self.assertEqual(depth, 0, sid)
            else:
                self.assertIn(parent, seen, 'child %s listed before its parent' % sid)
                self.assertEqual(depth, seen[parent] + 1, sid)
            seen[sid] = depth

    def test_concurrent_crossed_moves_never_build_a_cycle(self):
        owner, eid = self.owner_entity()
        a = self.new(owner, eid, 'a')['id']
        b = self.new(owner, eid, 'b')['id']
        kid = self.new(owner, eid, 'kid', parent=b)['id']
        for _ in range(15):
            got = {}
            go = threading.Barrier(2)

            def mover(sid, parent):
                go.wait()
                got[sid] = self.move(owner, eid, sid, {'parentId': parent})[0]

            ts = [threading.Thread(target=mover, args=(a, kid)),
                  threading.Thread(target=mover, args=(b, a))]
            for t in ts:
                t.start()
            for t in ts:
                t.join(harness.scaled(30))
            # One of the two closes a cycle after the other: exactly one lands.
            self.assertEqual(sorted(got.values()), [200, 409], got)
            self.assertTreeSound(owner, eid)
            for sid in (a, b):
                self.assertOk(self.move(owner, eid, sid, {'parentId': None}))
        moved = self.events_of(owner, eid, 'skill.moved')
        self.assertEqual(len(moved), 30)

    # --- deleting ---

    def test_delete_with_children_is_409_naming_them(self):
        owner, eid = self.owner_entity()
        top = self.new(owner, eid, 'Top')['id']
        k1 = self.new(owner, eid, 'Kid 1', parent=top)['id']
        k2 = self.new(owner, eid, 'Kid 2', parent=top)['id']
        g = self.new(owner, eid, 'Grandkid', parent=k1)['id']
        err = self.assertEnvelope(self.delete(owner, eid, top), 409, 'conflict', field='skillId')
        self.assertIn(k1, err['message'])
        self.assertIn(k2, err['message'])
        self.assertNotIn(g, err['message'])
        err = self.assertEnvelope(self.delete(owner, eid, k1), 409, 'conflict', field='skillId')
        self.assertIn(g, err['message'])
        self.assertEqual(len(self.tree(owner, eid)['skills']), 4)
        for sid in (g, k1, k2, top):
            self.assertOk(self.delete(owner, eid, sid))
        self.assertEqual(self.tree(owner, eid)['skills'], [])

    # --- an entity of an earlier release ---

    def make_earlier_release(self, eid):
        """Rewrites the entity's stored skills and levels as an earlier release wrote them:
        Skill JSONs without parentId and depth, S lines without the parent column, Level
        JSONs without requires."""
        key = 'ent:{%s}' % eid
        tail = ',"parentId":null,"depth":0}'
        for sid, js in zip(*[iter(self.r.cli('HGETALL', key + ':skills'))] * 2):
            js = text(js)
            self.assertTrue(js.endswith(tail), js)
            self.r.cli('HSET', key + ':skills', text(sid), js[:-len(tail)] + '}')
        flat = self.r.cli('ZRANGE', key + ':skills:order', 0, -1, 'WITHSCORES')
        for js, score in zip(*[iter(flat)] * 2):
            js = text(js)
            self.r.cli('ZREM', key + ':skills:order', js)
            self.r.cli('ZADD', key + ':skills:order', text(score), js[:-len(tail)] + '}')
        tree = text(self.r.cli('HGET', key, 'skilltree'))
        self.assertEqual(tree.count(tail), 2)
        tpl = text(self.r.cli('HGET', key, 'progtpl'))
        old = '\n'.join(ln.rsplit('\t', 1)[0] if ln.startswith('S\t') else ln
                        for ln in tpl.split('\n'))
        lv_tail = ',"requires":[]'
        for lid, js in zip(*[iter(self.r.cli('HGETALL', key + ':levels'))] * 2):
            self.r.cli('HSET', key + ':levels', text(lid), text(js).replace(lv_tail, ''))
        flat = self.r.cli('ZRANGE', key + ':levels:order', 0, -1, 'WITHSCORES')
        for js, score in zip(*[iter(flat)] * 2):
            self.r.cli('ZREM', key + ':levels:order', js)
            self.r.cli('ZADD', key + ':levels:order', text(score), text(js).replace(lv_tail, ''))
        self.assertIn(lv_tail, tree)
        tree = tree.replace(tail, '}').replace(lv_tail, '')
        self.r.cli('HSET', key, 'skilltree', tree, 'progtpl', old)

    def test_entity_of_an_earlier_release_reads_and_awards_unchanged(self):
        owner, eid = self.owner_entity()
        member, = self.wallets(1)
        self.add_members(owner, eid, member.address)
        a = self.new(owner, eid, 'Rust', description='systems')
        b = self.new(owner, eid, 'Go/lang "x"')
        self.assertOk(self.put_level(owner, eid, 'gold', [a['id'], b['id']], [2, 1], xp=3), 201)
        self.award_ok(owner, eid, self.contrib(member.address, [a['id']], [1]))
        want_skills = self.tree(owner, eid)['skills']
        want_levels = self.tree(owner, eid)['levels']
        want_prog = self.prog(owner, eid, member.address)
        self.make_earlier_release(eid)
        # Read as roots of depth 0, levels requiring nothing: what this release renders.
        got = self.tree(owner, eid)
        self.assertEqual(got['skills'], want_skills)
        self.assertEqual(got['levels'], want_levels)
        self.assertEqual([lv['requires'] for lv in got['levels']], [[]])
        self.assertEqual([(s['parentId'], s['depth']) for s in got['skills']], [(None, 0)] * 2)
        self.assertEqual(self.prog(owner, eid, member.address), want_prog)
        # Awards land as before, and reach the level.
        self.award_ok(owner, eid, self.contrib(member.address, [a['id'], b['id']], [1, 1]))
        p = self.prog(owner, eid, member.address)
        self.assertEqual(self.scores(p), {a['id']: 2, b['id']: 1})
        self.assertTrue(self.level_of(p, 'gold')['reached'])
        # An earlier release's skill answers an update in this release's form.
        s = self.assertOk(self.move(owner, eid, a['id'], {'description': 'more'}))['data']
        self.assertEqual((s['parentId'], s['depth'], s['description']), (None, 0, 'more'))
        # A child under an earlier release's skill; the tree is rendered whole in this form.
        c = self.new(owner, eid, 'Tokio', parent=b['id'])
        self.assertEqual(c['depth'], 1)
        self.assertEqual(self.listing(owner, eid), [(a['id'], None, 0), (b['id'], None, 0),
                                                    (c['id'], b['id'], 1)])
        self.assertEqual(self.tree(owner, eid)['skills'][1], want_skills[1])
        self.assertEqual([ln[3] for ln in self.s_lines(eid)], ['', '', b['id']])
        self.assertOk(self.move(owner, eid, b['id'], {'parentId': a['id']}))
        self.assertEqual(self.listing(owner, eid), [(a['id'], None, 0), (b['id'], a['id'], 1),
                                                    (c['id'], b['id'], 2)])


if __name__ == '__main__':
    harness.main()
