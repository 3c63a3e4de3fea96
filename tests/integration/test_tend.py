"""Keeping a community (CONTRACT section 8, part A): members removed (one, many) and leaving, an
admin stepping down, skills renamed and deleted, levels deleted. Roles for each route, the
batch all or nothing, what removal means for the users list, the boards, awards and progress,
a re-add giving back what the member had, and each change's event written exactly once."""

import os
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

NAMES = ['owner', 'admin', 'admin2', 'm1', 'm2', 'm3', 'm4', 'outsider', 'platform']


def bad_checksum(address):
    """The address in mixed case that fails EIP-55: each letter's case flipped from the
    checksummed form."""
    good = harness.eip55(address)
    flipped = ''.join(c.swapcase() if c.isalpha() else c for c in good[2:])
    return '0x' + flipped


class TendTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.w = dict(zip(NAMES, harness.Wallet.random(len(NAMES))))
        cls.svc = cls.class_entityd(redis=cls.r, env={
            'PLATFORM_ADMINS': cls.w['platform'].address})
        cls.port = cls.svc.port
        signer = harness.Signer(harness.current_message(cls.port)[0])
        cls.q = {n: signer.query(w) for n, w in cls.w.items()}
        cls.addr = {n: w.address.lower() for n, w in cls.w.items()}

    # --- helpers ---

    def call(self, who, method, path, body=None):
        if who == 'unsigned':
            path += ('&' if '?' in path else '?') + 'address=' + self.w['owner'].address
        elif who is not None:
            path += ('&' if '?' in path else '?') + self.q[who]
        return harness.request(self.port, method, path, body=body)

    def entity(self, public=True, members=('m1', 'm2', 'm3')):
        body = {'name': 'Guild ' + uuid.uuid4().hex[:6], 'description': '',
                'ownerAddresses': [self.w['owner'].address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'public': public}
        eid = self.assertOk(self.call('owner', 'POST', '/api/entities', body), 201)['data']['id']
        self.assertOk(self.call('owner', 'POST', '/api/entities/%s/admins' % eid,
                                {'addresses': [self.w['admin'].address,
                                               self.w['admin2'].address]}))
        if members:
            self.force_add(eid, *members)
        return eid

    def force_add(self, eid, *names):
        return self.assertOk(self.call('owner', 'POST', '/api/entities/%s/force-add' % eid, {
            'addresses': [self.w[m].address for m in names], 'Chain': 'eth'}))

    def disable(self, eid):
        body = {'id': eid, 'name': 'Guild', 'description': '',
                'ownerAddresses': [self.w['owner'].address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'isEnabled': False}
        self.assertOk(self.call('platform', 'POST', '/api/entities', body))

    def skills(self, eid, *names):
        b = self.assertOk(self.call('owner', 'POST', '/api/skills/multiple',
                                    {'names': list(names), 'entityID': eid}), 201)
        return [s['id'] for s in b['data']]

    def level(self, eid, lv, xp, skills=(), scores=()):
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/levels/%s/update' % (eid, lv), {
            'name': 'Level ' + lv, 'skillIds': list(skills), 'scores': list(scores), 'XP': xp})
        self.assertIn(st, (200, 201), b)

    def award(self, eid, member, xp, skills=None, who='owner'):
        body = {'member': self.addr[member], 'xp': xp, 'title': 'work',
                'skills': [{'skillId': s, 'score': v} for s, v in (skills or {}).items()]}
        return self.call(who, 'POST', '/api/entities/%s/contributions' % eid, body)

    def users(self, eid, who='owner'):
        b = self.assertOk(self.call(who, 'GET', '/api/entities/%s/users?limit=1000' % eid))
        return [u['address'] for u in b['users']]

    def board(self, eid, by='xp', who='owner'):
        b = self.assertOk(self.call(who, 'GET', '/api/entities/%s/leaderboard?by=%s' % (eid, by)))
        return [(e['rank'], e['member'], e['value']) for e in b['data']]

    def progress(self, eid, member, who='owner'):
        return self.call(who, 'GET', '/api/entities/%s/members/%s/progress' %
                         (eid, self.addr[member]))

    def tree(self, eid):
        return self.assertOk(self.call('owner', 'GET', '/api/skills?entityID=' + eid))['data']

    def events(self, eid, typ=None):
        b = self.assertOk(self.call('owner', 'GET', '/api/entities/%s/events?limit=1000' % eid))
        return [e for e in b['data'] if typ is None or e['type'] == typ]

    def remove(self, who, eid, member):
        return self.call(who, 'DELETE', '/api/entities/%s/members/%s' % (eid, self.addr[member]))

    def remove_many(self, who, eid, addresses):
        return self.call(who, 'POST', '/api/entities/%s/members/remove' % eid,
                         {'addresses': addresses})

    # --- roles ---

    def matrix(self, route, allowed, refused=('m1', 'outsider'), disabled=None, prepare=None):
        """route(who, eid, prepared) -> response, on a fresh entity for each caller, prepared
        by prepare(eid) first. allowed answer 200, refused 403; unsigned 401. On a disabled
        entity, `disabled` maps caller -> status."""
        def fresh():
            eid = self.entity()
            return eid, prepare(eid) if prepare else None
        for who in allowed:
            self.assertOk(route(who, *fresh()))
        for who in refused:
            self.assertEnvelope(route(who, *fresh()), 403, 'forbidden')
        self.assertEnvelope(route('unsigned', *fresh()), 401, 'unauthenticated')
        for who, status in (disabled or {}).items():
            eid, prepared = fresh()
            self.disable(eid)
            resp = route(who, eid, prepared)
            if status == 200:
                self.assertOk(resp)
            else:
                self.assertEnvelope(resp, status, {403: 'forbidden', 404: 'not_found'}[status])

    STAFF_DISABLED = {'owner': 403, 'admin': 403, 'm1': 404, 'outsider': 404, 'platform': 200}

    def test_roles_remove_one(self):
        self.matrix(lambda who, eid, _: self.remove(who, eid, 'm2'),
                    ('owner', 'admin', 'platform'), disabled=self.STAFF_DISABLED)

    def test_roles_remove_many(self):
        self.matrix(lambda who, eid, _: self.remove_many(who, eid, [self.addr['m2']]),
                    ('owner', 'admin', 'platform'), disabled=self.STAFF_DISABLED)

    def test_roles_leave(self):
        # Anyone signed in may leave; only a member is removed.
        self.matrix(lambda who, eid, _: self.call(who, 'POST', '/api/entities/%s/leave' % eid),
                    ('owner', 'admin', 'm1', 'outsider', 'platform'), refused=(),
                    disabled={'m1': 404, 'outsider': 404, 'owner': 403, 'admin': 403,
                              'platform': 200})

    def test_roles_admin_steps_down(self):
        def own(who, eid, _):
            return self.call(who, 'DELETE', '/api/entities/%s/admins/%s' % (eid, self.addr['admin']))
        self.matrix(own, ('owner', 'admin', 'platform'), refused=('admin2', 'm1', 'outsider'),
                    disabled={'admin': 403, 'owner': 403, 'platform': 200, 'm1': 404})
        # Another admin removed by an admin: refused, and the admin set is unchanged.
        eid = self.entity()
        resp = self.call('admin', 'DELETE', '/api/entities/%s/admins/%s' %
                         (eid, self.addr['admin2']))
        self.assertEnvelope(resp, 403, 'forbidden')
        admins = self.assertOk(self.call('owner', 'GET', '/api/entities/%s/admins' % eid))
        self.assertIn(self.addr['admin2'], admins['admins'])
        # Stepping down: gone from the list, one admin.removed event.
        out = self.assertOk(self.call('admin', 'DELETE', '/api/entities/%s/admins/%s' %
                                      (eid, self.w['admin'].address)))
        self.assertEqual(out['admins'], [self.addr['admin2']])
        ev = self.events(eid, 'admin.removed')
        self.assertEqual([e['data'] for e in ev], [{'address': self.addr['admin']}])
        self.assertEqual(ev[0]['actor'], self.addr['admin'])
        # Once stepped down, the former admin may not write as staff.
        self.assertEnvelope(self.remove('admin', eid, 'm1'), 403, 'forbidden')

    def skill_route(self, action):
        def route(who, eid, sid):
            if action == 'update':
                return self.call(who, 'POST', '/api/entities/%s/skills/%s/update' % (eid, sid),
                                 {'name': 'Rust 2'})
            return self.call(who, 'DELETE', '/api/entities/%s/skills/%s' % (eid, sid))
        return route

    def test_roles_skill_update(self):
        self.matrix(self.skill_route('update'), ('owner', 'admin', 'platform'),
                    disabled=self.STAFF_DISABLED, prepare=lambda eid: self.skills(eid, 'Rust')[0])

    def test_roles_skill_delete(self):
        self.matrix(self.skill_route('delete'), ('owner', 'admin', 'platform'),
                    disabled=self.STAFF_DISABLED, prepare=lambda eid: self.skills(eid, 'Rust')[0])

    def test_roles_level_delete(self):
        def route(who, eid, _):
            return self.call(who, 'DELETE', '/api/entities/%s/levels/lv' % eid)
        self.matrix(route, ('owner', 'admin', 'platform'), disabled=self.STAFF_DISABLED,
                    prepare=lambda eid: self.level(eid, 'lv', 10))

    def test_unknown_entity_skill_level_address(self):
        eid = self.entity()
        other = 'c-' + str(uuid.uuid4())
        sid = 's-' + str(uuid.uuid4())
        for method, path in [
                ('DELETE', '/api/entities/%s/members/%s' % (other, self.addr['m1'])),
                ('POST', '/api/entities/%s/leave' % other),
                ('DELETE', '/api/entities/%s/skills/%s' % (eid, sid)),
                ('DELETE', '/api/entities/%s/skills/not-an-id' % eid),
                ('DELETE', '/api/entities/%s/levels/nope' % eid),
                ('DELETE', '/api/entities/%s/levels/bad.id' % eid),
                ('DELETE', '/api/entities/%s/members/0x12' % eid)]:
            self.assertEnvelope(self.call('owner', method, path), 404, 'not_found')
        self.assertEnvelope(self.call('owner', 'POST', '/api/entities/%s/skills/%s/update' %
                                      (eid, sid), {'name': 'x'}), 404, 'not_found')
        self.assertEnvelope(self.remove_many('owner', other, [self.addr['m1']]), 404,
                            'not_found')

    # --- removing members ---

    def test_batch_all_or_nothing_with_field_paths(self):
        eid = self.entity()
        before = self.users(eid)
        for addresses, field in [
                ([self.addr['m1'], '0x1234', self.addr['m2']], 'addresses[1]'),
                ([self.addr['m1'], self.addr['m2'], bad_checksum(self.addr['m3'])],
                 'addresses[2]'),
                ([self.addr['m1'], 7], 'addresses[1]'),
                ([], 'addresses'),
                (['0x' + '%040x' % i for i in range(1001)], 'addresses')]:
            self.assertEnvelope(self.remove_many('owner', eid, addresses), 400,
                                'invalid_request', field=field)
        self.assertEnvelope(self.call('owner', 'POST', '/api/entities/%s/members/remove' % eid,
                                      {}), 400, 'invalid_request', field='addresses')
        self.assertEqual(self.users(eid), before)
        self.assertEqual(self.events(eid, 'member.removed'), [])
        # 1000 is the most: accepted, the ones not members counted missing.
        many = ['0x' + '%040x' % i for i in range(999)] + [self.addr['m1']]
        out = self.assertOk(self.remove_many('owner', eid, many))
        self.assertEqual((out['removed'], out['missing']), (1, 999))

    def test_removal_is_idempotent_and_counts_missing(self):
        eid = self.entity()
        self.assertEqual(self.assertOk(self.remove('owner', eid, 'm1')),
                         {'success': True, 'removed': 1, 'missing': 0})
        self.assertEqual(self.assertOk(self.remove('owner', eid, 'm1')),
                         {'success': True, 'removed': 0, 'missing': 1})
        # Mixed case with a valid checksum, a duplicate counted once, a stranger missing.
        out = self.assertOk(self.remove_many('admin', eid, [
            harness.eip55(self.addr['m2']), self.addr['m2'], self.addr['outsider'],
            self.addr['m1']]))
        self.assertEqual((out['removed'], out['missing']), (1, 2))
        self.assertEqual(self.users(eid), [self.addr['m3']])
        # One event per call that removed someone, listing those removed.
        ev = self.events(eid, 'member.removed')
        self.assertEqual([e['data'] for e in ev], [{'addresses': [self.addr['m1']]},
                                                   {'addresses': [self.addr['m2']]}])
        self.assertEqual([e['actor'] for e in ev], [self.addr['owner'], self.addr['admin']])

    def test_removed_member_off_lists_boards_and_awards(self):
        eid = self.entity(public=False)
        a, b = self.skills(eid, 'Rust', 'Design')
        self.level(eid, 'one', 10, [a], [2])
        self.assertOk(self.award(eid, 'm1', 50, {a: 5, b: 3}), 201)
        self.assertOk(self.award(eid, 'm2', 20, {a: 2}), 201)
        self.assertOk(self.award(eid, 'm3', 50, {}), 201)
        prog = self.assertOk(self.progress(eid, 'm1'))['data']
        reached_at = prog['levels'][0]['reachedAt']
        self.assertIsNotNone(reached_at)
        self.assertEqual(self.board(eid), [(1, min(self.addr['m1'], self.addr['m3']), 50),
                                           (1, max(self.addr['m1'], self.addr['m3']), 50),
                                           (3, self.addr['m2'], 20)])
        before_users = self.users(eid)  # cached page of the list with m1
        self.assertIn(self.addr['m1'], before_users)
        # cached pages of the skill boards with m1
        self.assertEqual(self.board(eid, a), [(1, self.addr['m1'], 5), (2, self.addr['m2'], 2)])
        self.assertEqual(self.board(eid, b), [(1, self.addr['m1'], 3)])

        self.assertOk(self.remove('owner', eid, 'm1'))
        self.assertEqual(self.users(eid), sorted([self.addr['m2'], self.addr['m3']]))
        self.assertEqual(self.board(eid), [(1, self.addr['m3'], 50), (2, self.addr['m2'], 20)])
        self.assertEqual(self.board(eid, a), [(1, self.addr['m2'], 2)])
        self.assertEqual(self.board(eid, b), [])
        self.assertEnvelope(self.award(eid, 'm1', 5), 400, 'invalid_request', field='member')
        # Progress and contributions stay, for staff and the address itself; rank none.
        for who in ('owner', 'admin', 'm1'):
            d = self.assertOk(self.progress(eid, 'm1', who))['data']
            self.assertEqual((d['xp'], d['rank']), (50, None), who)
            self.assertEqual({s['skillId']: s['score'] for s in d['skills']}, {a: 5, b: 3})
            self.assertEqual(d['levels'][0]['reachedAt'], reached_at)
            c = self.assertOk(self.call(who, 'GET', '/api/entities/%s/members/%s/contributions'
                                        % (eid, self.addr['m1'])))
            self.assertEqual(len(c['data']), 1)
        self.assertEnvelope(self.progress(eid, 'm1', 'outsider'), 403, 'forbidden')
        # The former member reads no more of the private entity than its own records.
        self.assertEnvelope(self.call('m1', 'GET', '/api/entities/%s/users' % eid), 403,
                            'forbidden')

        # Re-added: back on every board with what it had, same rank; reachedAt kept.
        out = self.force_add(eid, 'm1')
        self.assertEqual((out['added'], out['existing']), (1, 0))
        self.assertEqual(self.board(eid), [(1, min(self.addr['m1'], self.addr['m3']), 50),
                                           (1, max(self.addr['m1'], self.addr['m3']), 50),
                                           (3, self.addr['m2'], 20)])
        self.assertEqual(self.board(eid, a), [(1, self.addr['m1'], 5), (2, self.addr['m2'], 2)])
        self.assertEqual(self.board(eid, b), [(1, self.addr['m1'], 3)])
        d = self.assertOk(self.progress(eid, 'm1'))['data']
        self.assertEqual((d['xp'], d['rank'], d['levels'][0]['reachedAt']), (50, 1, reached_at))
        self.assertOk(self.award(eid, 'm1', 5), 201)
        self.assertEqual(self.board(eid)[0], (1, self.addr['m1'], 55))
        self.assertEqual(len(self.events(eid, 'member.removed')), 1)

    def test_concurrent_removals_each_answered_as_alone(self):
        # Removals arriving together share one script call (group.h): each is still answered
        # and recorded as alone, a member removed twice at once counts once.
        names = ['m1', 'm2', 'm3', 'm4']
        eid = self.entity(members=names)
        (a,) = self.skills(eid, 'Rust')
        for i, m in enumerate(names):
            self.assertOk(self.award(eid, m, 10 + i, {a: 1 + i}), 201)
        self.assertEqual(len(self.board(eid)), 4)
        targets = names + ['m1', 'm2', 'outsider']
        out = [None] * len(targets)
        barrier = threading.Barrier(len(targets))

        def go(i):
            barrier.wait(timeout=30)
            out[i] = self.remove('admin', eid, targets[i])

        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(targets))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        bodies = [self.assertOk(r) for r in out]
        self.assertEqual(sum(b['removed'] for b in bodies), 4)
        self.assertEqual(sum(b['missing'] for b in bodies), 3)
        for m in names:
            got = [b['removed'] for t, b in zip(targets, bodies) if t == m]
            self.assertEqual(sorted(got), [0] * (len(got) - 1) + [1], m)
        self.assertEqual(self.users(eid), [])
        self.assertEqual((self.board(eid), self.board(eid, a)), ([], []))
        for key in ('members', 'members:order'):
            self.assertEqual(self.r.cli('EXISTS', 'ent:{%s}:%s' % (eid, key)), 0, key)
        # the board entries, off the pages at once, are taken off by the sweeper (test_sweep.py)
        keys = ['ent:{%s}:%s' % (eid, k) for k in ('lb:xp', 'lb:s:' + a, 'lb:xp:gone',
                                                   'lb:s:%s:gone' % a, 'lb:unswept', 'sweep')]
        harness.wait_for(lambda: self.r.cli('EXISTS', *keys) == 0, harness.scaled(30),
                         interval=0.05, what='the sweep')
        ev = self.events(eid, 'member.removed')
        self.assertEqual(sorted(e['data']['addresses'][0] for e in ev),
                         sorted(self.addr[m] for m in names))

    def test_revoking_for_a_removed_member_keeps_it_off_the_boards(self):
        eid = self.entity()
        (a,) = self.skills(eid, 'Rust')
        cid = self.assertOk(self.award(eid, 'm1', 30, {a: 4}), 201)['data']['id']
        self.assertOk(self.award(eid, 'm1', 10, {a: 1}), 201)
        self.assertOk(self.remove('owner', eid, 'm1'))
        self.assertOk(self.call('owner', 'POST', '/api/entities/%s/contributions/%s/revoke' %
                                (eid, cid), {'reason': 'spam'}))
        self.assertEqual(self.board(eid), [])
        self.assertEqual(self.board(eid, a), [])
        self.force_add(eid, 'm1')
        self.assertEqual(self.board(eid), [(1, self.addr['m1'], 10)])
        self.assertEqual(self.board(eid, a), [(1, self.addr['m1'], 1)])

    def test_users_page_cache_never_shows_a_removed_member(self):
        eid = self.entity(members=('m1', 'm2'))
        both = sorted([self.addr['m1'], self.addr['m2']])  # one addedAt: by address
        self.assertEqual(self.users(eid), both)
        self.assertEqual(self.users(eid), both)  # from the cache
        self.assertOk(self.remove('owner', eid, 'm1'))
        self.force_add(eid, 'm3')  # the same count again: only the version tells
        # (in any order: m3's addedAt may be the same millisecond as m2's, then by address)
        self.assertCountEqual(self.users(eid), [self.addr['m2'], self.addr['m3']])
        self.assertOk(self.remove('owner', eid, 'm2'))
        self.assertEqual(self.users(eid), [self.addr['m3']])
        st = self.r.cli('HLEN', 'ent:{%s}:members' % eid)
        self.assertEqual(int(st), 1)
        self.assertEqual(int(self.r.cli('ZCARD', 'ent:{%s}:members:order' % eid)), 1)

    def test_leave(self):
        eid = self.entity(public=False)
        (a,) = self.skills(eid, 'Rust')
        self.assertOk(self.award(eid, 'm1', 7, {a: 1}), 201)
        leave = '/api/entities/%s/leave' % eid
        self.assertEqual(self.assertOk(self.call('m1', 'POST', leave)),
                         {'success': True, 'removed': 1})
        self.assertEqual(self.assertOk(self.call('m1', 'POST', leave)),
                         {'success': True, 'removed': 0})
        self.assertEqual(self.users(eid), sorted([self.addr['m2'], self.addr['m3']]))
        self.assertEqual(self.board(eid), [])
        ev = self.events(eid, 'member.left')
        self.assertEqual([(e['actor'], e['data']) for e in ev],
                         [(self.addr['m1'], {'address': self.addr['m1']})])
        self.assertEqual(self.events(eid, 'member.removed'), [])
        # Its own progress stays readable to it.
        self.assertEqual(self.assertOk(self.progress(eid, 'm1', 'm1'))['data']['xp'], 7)

    # --- skills ---

    def update_skill(self, eid, sid, body, who='owner'):
        return self.call(who, 'POST', '/api/entities/%s/skills/%s/update' % (eid, sid), body)

    def test_skill_update(self):
        eid = self.entity()
        a, b = self.skills(eid, 'Rust', 'Design')
        self.assertOk(self.award(eid, 'm1', 3, {a: 3}), 201)
        # Another skill's name, trimmed and case-folded: 409, nothing changed.
        for name in ('Design', ' design ', 'DESIGN'):
            self.assertEnvelope(self.update_skill(eid, a, {'name': name}), 409, 'conflict')
        # Its own name in another case: fine.
        s = self.assertOk(self.update_skill(eid, a, {'name': '  RUST  '}))['data']
        self.assertEqual((s['id'], s['name'], s['description']), (a, 'RUST', ''))
        # A real rename: the old name is free, the skill tree and progress show the new one.
        s = self.assertOk(self.update_skill(eid, a, {'name': 'Rust lang',
                                                     'description': 'systems\nwork'}))['data']
        self.assertEqual((s['name'], s['description']), ('Rust lang', 'systems\nwork'))
        tree = self.tree(eid)
        self.assertEqual([(x['id'], x['name']) for x in tree['skills']],
                         [(a, 'Rust lang'), (b, 'Design')])
        self.assertEqual(tree['skills'][0], s)
        d = self.assertOk(self.progress(eid, 'm1'))['data']
        self.assertEqual(d['skills'],
                         [{'skillId': a, 'name': 'Rust lang', 'score': 3, 'total': 3}])
        self.skills(eid, 'rust')  # the old name, free
        # Description alone keeps the name.
        s = self.assertOk(self.update_skill(eid, a, {'description': 'x'}))['data']
        self.assertEqual((s['name'], s['description']), ('Rust lang', 'x'))
        self.assertEnvelope(self.update_skill(eid, b, {'name': 'rust LANG'}), 409, 'conflict')
        # Validation as creation.
        self.assertEnvelope(self.update_skill(eid, a, {}), 400, 'invalid_request', field='name')
        self.assertEnvelope(self.update_skill(eid, a, {'name': '   '}), 400, 'invalid_request',
                            field='name')
        self.assertEnvelope(self.update_skill(eid, a, {'name': 'x' * 101}), 400,
                            'invalid_request', field='name')
        self.assertEnvelope(self.update_skill(eid, a, {'description': 5}), 400,
                            'invalid_request', field='description')
        ev = self.events(eid, 'skill.updated')
        self.assertEqual([e['data'] for e in ev], [
            {'id': a, 'changed': ['name']}, {'id': a, 'changed': ['name', 'description']},
            {'id': a, 'changed': ['description']}])

    def test_skill_delete(self):
        eid = self.entity()
        a, b = self.skills(eid, 'Rust', 'Design')
        self.level(eid, 'zeta', 10, [a, b], [1, 1])
        self.level(eid, 'alpha', 20, [a], [1])
        self.level(eid, 'other', 5, [b], [1])
        cid = self.assertOk(self.award(eid, 'm1', 10, {a: 4, b: 2}), 201)['data']['id']
        self.assertEqual(self.board(eid, a), [(1, self.addr['m1'], 4)])
        path = '/api/entities/%s/skills/%s' % (eid, a)
        err = self.assertEnvelope(self.call('owner', 'DELETE', path), 409, 'conflict',
                                  field='skillId')
        self.assertIn('alpha, zeta', err['message'])
        self.assertNotIn('other', err['message'])
        self.level(eid, 'zeta', 10, [b], [1])
        self.assertOk(self.call('owner', 'DELETE', '/api/entities/%s/levels/alpha' % eid))
        self.assertEqual(self.assertOk(self.call('admin', 'DELETE', path)),
                         {'success': True, 'deleted': True})
        self.assertEnvelope(self.call('owner', 'DELETE', path), 404, 'not_found')
        # Gone from the skills list, progress, boards and awards; its name free.
        self.assertEqual([s['id'] for s in self.tree(eid)['skills']], [b])
        d = self.assertOk(self.progress(eid, 'm1'))['data']
        self.assertEqual([s['skillId'] for s in d['skills']], [b])
        self.assertNotIn(a, str(d['levels']))
        self.assertEnvelope(self.call('owner', 'GET', '/api/entities/%s/leaderboard?by=%s' %
                                      (eid, a)), 400, 'invalid_request', field='by')
        self.assertEqual(self.r.cli('EXISTS', 'ent:{%s}:lb:s:%s' % (eid, a)), 0)
        self.assertEnvelope(self.award(eid, 'm1', 1, {b: 1, a: 1}), 400, 'invalid_request',
                            field='skills[1].skillId')
        self.assertEnvelope(self.call('owner', 'POST', '/api/entities/%s/levels/new/update' %
                                      eid, {'name': 'n', 'skillIds': [a], 'scores': [1],
                                            'XP': 1}), 400, 'invalid_request',
                            field='skillIds[0]')
        (again,) = self.skills(eid, ' RUST ')
        self.assertNotEqual(again, a)
        # Contributions keep what they recorded; revoking one leaves no board of the skill.
        c = self.assertOk(self.call('owner', 'GET', '/api/entities/%s/members/%s/contributions'
                                    % (eid, self.addr['m1'])))['data'][0]
        self.assertEqual(c['skills'], [{'skillId': a, 'score': 4}, {'skillId': b, 'score': 2}])
        self.assertOk(self.call('owner', 'POST', '/api/entities/%s/contributions/%s/revoke' %
                                (eid, cid), {'reason': 'x'}))
        self.assertEqual(self.r.cli('EXISTS', 'ent:{%s}:lb:s:%s' % (eid, a)), 0)
        self.assertEqual(self.board(eid, b), [])
        ev = self.events(eid, 'skill.deleted')
        self.assertEqual([e['data'] for e in ev], [{'id': a, 'name': 'Rust'}])
        # Removing and re-adding a member does not bring the board back (nor tombstones it).
        self.assertOk(self.remove('owner', eid, 'm1'))
        self.assertEqual(self.r.cli('EXISTS', 'ent:{%s}:lb:s:%s:gone' % (eid, a)), 0)
        self.force_add(eid, 'm1')
        self.assertEqual(self.r.cli('EXISTS', 'ent:{%s}:lb:s:%s' % (eid, a)), 0)

    # --- levels ---

    def test_level_delete_and_recreate(self):
        eid = self.entity()
        (a,) = self.skills(eid, 'Rust')
        self.level(eid, 'gold', 10, [a], [1])
        self.level(eid, 'silver', 5)
        self.assertOk(self.award(eid, 'm1', 20, {a: 2}), 201)
        d = self.assertOk(self.progress(eid, 'm1'))['data']
        self.assertEqual((d['level'], [lv['reached'] for lv in d['levels']]),
                         ('gold', [True, True]))
        path = '/api/entities/%s/levels/gold' % eid
        self.assertEqual(self.assertOk(self.call('admin', 'DELETE', path)),
                         {'success': True, 'deleted': True})
        self.assertEnvelope(self.call('owner', 'DELETE', path), 404, 'not_found')
        self.assertEqual([lv['id'] for lv in self.tree(eid)['levels']], ['silver'])
        d = self.assertOk(self.progress(eid, 'm1'))['data']
        self.assertEqual(([lv['id'] for lv in d['levels']], d['level']), (['silver'], 'silver'))
        # Created again with the same id: the old reachedAt is not inherited.
        self.level(eid, 'gold', 100, [a], [1])
        d = self.assertOk(self.progress(eid, 'm1'))['data']
        gold = [lv for lv in d['levels'] if lv['id'] == 'gold'][0]
        self.assertEqual((gold['reached'], gold['reachedAt']), (False, None))
        # Even with its threshold met at once, reachedAt comes only from a new award.
        self.level(eid, 'gold', 10, [a], [1])
        gold = [lv for lv in self.assertOk(self.progress(eid, 'm1'))['data']['levels']
                if lv['id'] == 'gold'][0]
        self.assertEqual((gold['reached'], gold['reachedAt']), (True, None))
        self.assertOk(self.award(eid, 'm1', 1), 201)
        gold = [lv for lv in self.assertOk(self.progress(eid, 'm1'))['data']['levels']
                if lv['id'] == 'gold'][0]
        self.assertTrue(gold['reached'])
        self.assertIsNotNone(gold['reachedAt'])
        reached = [e['data'] for e in self.events(eid, 'level.reached')]
        self.assertEqual(reached.count({'member': self.addr['m1'], 'level': 'gold'}), 2)
        ev = self.events(eid, 'level.deleted')
        self.assertEqual([e['data'] for e in ev], [{'id': 'gold'}])
        # Deleted twice over, created a third time: still nothing inherited.
        self.assertOk(self.call('owner', 'DELETE', path))
        self.level(eid, 'gold', 10, [a], [1])
        gold = [lv for lv in self.assertOk(self.progress(eid, 'm1'))['data']['levels']
                if lv['id'] == 'gold'][0]
        self.assertEqual(gold['reachedAt'], None)


if __name__ == '__main__':
    harness.main()
