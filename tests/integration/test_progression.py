"""Member progression (CONTRACT section 5, design in SPEC-18): awards (one or a batch, all or
nothing), idempotent retries, revocation, progress and levels reached (thresholds raised and
lowered, endsAt, reachedAt kept after a revocation), leaderboard ranks, ties and cursor pages under
concurrent awards, contributions of a member, the event stream (order, cursors, EVENTS_MAX
trimming), every input field's error path, the role matrix, 100 parallel awards, and an award
whose answer timed out retried with its idempotency key (never applied twice; every score has its
contribution record and its event)."""

import datetime
import json
import os
import random
import re
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
from invariants import check_invariants  # noqa: E402

CONTRIB_ID = re.compile(r'^k-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')
ISO_MS = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$')
CONTRIB_FIELDS = {'id', 'entityID', 'member', 'skills', 'xp', 'title', 'url', 'createdAt',
                  'createdBy', 'revoked', 'revokedAt', 'revokedBy', 'reason'}
EVENT_TYPES = {'contribution.added', 'contribution.revoked', 'level.reached', 'member.added',
               'entity.updated', 'skill.added', 'level.updated', 'admin.added', 'admin.removed'}
WALLETS = 120


def rand_addr():
    return '0x' + os.urandom(20).hex()


def parse_iso(s):
    return datetime.datetime.strptime(s, '%Y-%m-%dT%H:%M:%S.%fZ').replace(
        tzinfo=datetime.timezone.utc)


def iso_to_ms(s):
    return int(parse_iso(s).timestamp() * 1000 + 0.5)


def fake_skill_id():
    return 's-' + str(uuid.uuid4())


class Api:
    """Requests against one entityd, with cached signatures over its sign-in message."""

    def __init__(self, port):
        self.port = port
        self.message, _ = harness.current_message(port)
        self._creds = {}

    def auth(self, w):
        c = self._creds.get(w.address)
        if c is None:
            c = self._creds[w.address] = w.sign(self.message)
        return harness.auth_query(*c)

    def req(self, method, path, body=None, headers=None, timeout=None):
        return harness.request(self.port, method, path, body=body, headers=headers,
                               timeout=timeout or scaled(15))

    def award(self, w, eid, body, raw=False):
        headers = {'Content-Type': 'application/json'} if raw else None
        return self.req('POST', '/api/entities/%s/contributions?%s' % (eid, self.auth(w)),
                        body, headers)

    def revoke(self, w, eid, cid, body):
        return self.req('POST', '/api/entities/%s/contributions/%s/revoke?%s' %
                        (eid, cid, self.auth(w)), body)

    def progress(self, w, eid, addr):
        return self.req('GET', '/api/entities/%s/members/%s/progress?%s' %
                        (eid, addr, self.auth(w)))

    def contributions(self, w, eid, addr, extra=''):
        return self.req('GET', '/api/entities/%s/members/%s/contributions?%s%s' %
                        (eid, addr, self.auth(w), extra))

    def leaderboard(self, w, eid, by='xp', extra=''):
        return self.req('GET', '/api/entities/%s/leaderboard?by=%s&%s%s' %
                        (eid, by, self.auth(w), extra))

    def events(self, w, eid, extra=''):
        return self.req('GET', '/api/entities/%s/events?%s%s' % (eid, self.auth(w), extra))


def ok(resp, status=200):
    st, _, body = resp
    assert st == status and isinstance(body, dict) and body.get('success') is True, \
        'expected %d, got %s %r' % (status, st, body)
    return body


class ProgressionBase(harness.ServiceTestCase):
    """Helpers over self.api (an Api) and self.pool (wallets)."""

    def wallets(self, n):
        self.assertGreaterEqual(len(self.pool), n, 'raise WALLETS')
        return [self.pool.pop() for _ in range(n)]

    def create_entity(self, owner, public=True):
        body = {'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': 'progression',
                'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
                'imageUrl': '', 'public': public}
        body = self.assertOk(self.api.req('POST', '/api/entities?' + self.api.auth(owner), body),
                             201)
        return body['data']['id']

    def update_entity(self, owner, eid, **extra):
        body = {'name': 'Guild renamed', 'description': 'progression',
                'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
                'imageUrl': ''}
        body.update(extra)
        return self.api.req('POST', '/api/entities?entityID=%s&%s' % (eid, self.api.auth(owner)),
                            body)

    def add_admins(self, owner, eid, *addrs):
        self.assertOk(self.api.req('POST', '/api/entities/%s/admins?%s' %
                                   (eid, self.api.auth(owner)), {'addresses': list(addrs)}))

    def remove_admin(self, owner, eid, addr):
        self.assertOk(self.api.req('DELETE', '/api/entities/%s/admins/%s?%s' %
                                   (eid, addr, self.api.auth(owner))))

    def add_members(self, by, eid, *addrs):
        return self.assertOk(self.api.req('POST', '/api/entities/%s/force-add?%s' %
                                          (eid, self.api.auth(by)),
                                          {'addresses': list(addrs), 'Chain': 'eth'}))

    def add_skill(self, w, eid, name):
        body = self.assertOk(self.api.req('POST', '/api/skills?' + self.api.auth(w),
                                          {'name': name, 'description': '', 'entityID': eid}),
                             201)
        return body['data']['id']

    def put_level(self, w, eid, lvid, skill_ids=(), scores=(), xp=0, ends_at='', name=None):
        return self.api.req('POST', '/api/entities/%s/levels/%s/update?%s' %
                            (eid, lvid, self.api.auth(w)),
                            {'name': name or 'Level %s' % lvid, 'description': '',
                             'skillIds': list(skill_ids), 'scores': list(scores),
                             'endsAt': ends_at, 'XP': xp})

    def setup_entity(self, public=True, skills=2, members=1):
        """A new entity with an owner, an admin, `members` member wallets, an outsider and
        `skills` skills. Returns (eid, roles dict, skill ids)."""
        owner, admin, outsider, *mem = self.wallets(3 + members)
        eid = self.create_entity(owner, public=public)
        self.add_admins(owner, eid, admin.address)
        self.add_members(owner, eid, *[m.address for m in mem])
        sids = [self.add_skill(owner, eid, 'Skill %d' % i) for i in range(skills)]
        roles = {'owner': owner, 'admin': admin, 'outsider': outsider, 'member': mem[0]}
        for i, m in enumerate(mem[1:]):
            roles['member%d' % (i + 2)] = m
        return eid, roles, sids

    def assertField(self, resp, field):
        """400 invalid_request naming field (or one of a tuple of acceptable spellings)."""
        if isinstance(field, tuple):
            st, _, body = resp
            self.assertEqual(st, 400, body)
            self.assertIn(body['error'].get('field'), field, body)
            return self.assertEnvelope(resp, 400, 'invalid_request', body['error'].get('field'))
        return self.assertEnvelope(resp, 400, 'invalid_request', field)

    def award_ok(self, w, eid, body, status=201):
        return self.assertOk(self.api.award(w, eid, body), status)['data']

    def contrib(self, member, sids=(), scores=(), title='work', **kw):
        c = {'member': member, 'skills': [{'skillId': s, 'score': n}
                                          for s, n in zip(sids, scores)], 'title': title}
        c.update(kw)
        return c

    def prog(self, w, eid, addr):
        return self.assertOk(self.api.progress(w, eid, addr))['data']

    def scores(self, prog):
        return {s['skillId']: s['score'] for s in prog['skills']}

    def level_of(self, prog, lvid):
        for lv in prog['levels']:
            if lv['id'] == lvid:
                return lv
        self.fail('level %s not in progress %r' % (lvid, prog))

    def all_events(self, w, eid, limit=1000, api=None):
        api = api or self.api
        out, after = [], None
        for _ in range(10000):
            extra = '&limit=%d' % limit + ('&after=%s' % after if after else '')
            body = self.assertOk(api.events(w, eid, extra))
            out.extend(body['data'])
            after = body['nextCursor']
            if after is None:
                return out
        self.fail('events: too many pages')

    def all_contributions(self, w, eid, addr, limit=100, api=None):
        api = api or self.api
        out, cursor = [], None
        for _ in range(10000):
            extra = '&limit=%d' % limit + ('&cursor=%s' % cursor if cursor else '')
            body = self.assertOk(api.contributions(w, eid, addr, extra))
            out.extend(body['data'])
            cursor = body['nextCursor']
            if cursor is None:
                return out
        self.fail('contributions: too many pages')

    def board(self, w, eid, by='xp', limit=100):
        out, cursor = [], None
        for _ in range(1000):
            extra = '&limit=%d' % limit + ('&cursor=%s' % cursor if cursor else '')
            body = self.assertOk(self.api.leaderboard(w, eid, by, extra))
            out.extend(body['data'])
            cursor = body['nextCursor']
            if cursor is None:
                return out
        self.fail('leaderboard: too many pages')

    def snapshot(self, w, eid, members, sids):
        """Everything a member-facing read shows: progress, leaderboards, events, contributions."""
        return {
            'progress': {m: self.prog(w, eid, m) for m in members},
            'contribs': {m: self.all_contributions(w, eid, m) for m in members},
            'board': {by: self.board(w, eid, by) for by in ['xp'] + list(sids)},
            'events': self.all_events(w, eid),
        }

    def check_consistency(self, w, eid, members, sids, api=None):
        """For each member: progress xp and scores == the sums over non-revoked contributions;
        every contribution has exactly one contribution.added event, every revoked one exactly
        one contribution.revoked; every contribution.added event names a stored contribution."""
        api = api or self.api
        events = self.all_events(w, eid, api=api)
        added = {}
        revoked = {}
        for ev in events:
            if ev['type'] == 'contribution.added':
                added[ev['data']['id']] = added.get(ev['data']['id'], 0) + 1
            elif ev['type'] == 'contribution.revoked':
                revoked[ev['data']['id']] = revoked.get(ev['data']['id'], 0) + 1
        problems = []
        all_ids = set()
        for m in members:
            cs = self.all_contributions(w, eid, m, api=api)
            ids = [c['id'] for c in cs]
            if len(set(ids)) != len(ids):
                problems.append('%s: a contribution listed twice' % m)
            all_ids |= set(ids)
            xp = sum(c['xp'] for c in cs if not c['revoked'])
            sc = {}
            for c in cs:
                if not c['revoked']:
                    for s in c['skills']:
                        sc[s['skillId']] = sc.get(s['skillId'], 0) + s['score']
            p = self.assertOk(api.progress(w, eid, m))['data']
            if p['xp'] != xp:
                problems.append('%s: progress xp %r, contributions sum %r' % (m, p['xp'], xp))
            have = {s['skillId']: s['score'] for s in p['skills'] if s['score']}
            if have != {k: v for k, v in sc.items() if v}:
                problems.append('%s: progress scores %r, contributions sum %r' % (m, have, sc))
            for c in cs:
                if added.get(c['id']) != 1:
                    problems.append('%s: %d contribution.added events' % (c['id'],
                                                                          added.get(c['id'], 0)))
                if c['revoked'] and revoked.get(c['id']) != 1:
                    problems.append('%s: revoked, %d contribution.revoked events' %
                                    (c['id'], revoked.get(c['id'], 0)))
                if not c['revoked'] and c['id'] in revoked:
                    problems.append('%s: not revoked, has a contribution.revoked event' % c['id'])
        for cid in added:
            if cid not in all_ids:
                problems.append('event contribution.added %s without its contribution' % cid)
        # the boards agree with the sums: every member above 0, at its value
        for by in ['xp'] + list(sids):
            board, cursor = {}, None
            for _ in range(1000):
                page = self.assertOk(api.leaderboard(w, eid, by, '&limit=100' + (
                    '&cursor=' + cursor if cursor else '')))
                board.update({e['member']: e['value'] for e in page['data']})
                cursor = page['nextCursor']
                if cursor is None:
                    break
            want = {}
            for m in members:
                p = self.assertOk(api.progress(w, eid, m))['data']
                v = p['xp'] if by == 'xp' else {x['skillId']: x['score']
                                                for x in p['skills']}.get(by, 0)
                if v > 0:
                    want[m] = v
            if {k: v for k, v in board.items() if k in members} != want:
                problems.append('board %s %r, progress says %r' % (by, board, want))
        return problems


class ProgressionTest(ProgressionBase):
    """One Redis and one entityd (one platform admin) for the class; each test its own entity."""

    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.platform = cls.pool.pop()
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env={'PLATFORM_ADMINS': cls.platform.address})
        cls.api = Api(cls.svc.port)

    # ------------------------------------------------------------------------------------
    # award: shapes

    def test_award_single_and_progress(self):
        eid, c, (s1, s2) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        t0 = int(time.time() * 1000)
        d = self.award_ok(owner, eid, self.contrib(harness.eip55(m), [s1, s2], [5, 3],
                                                   title='First work',
                                                   url='https://example.org/pr/1'))
        self.assertEqual(set(d), CONTRIB_FIELDS, d)
        self.assertRegex(d['id'], CONTRIB_ID)
        self.assertEqual((d['entityID'], d['member'], d['xp'], d['title'], d['url']),
                         (eid, m, 8, 'First work', 'https://example.org/pr/1'))
        self.assertEqual(d['skills'], [{'skillId': s1, 'score': 5}, {'skillId': s2, 'score': 3}])
        self.assertRegex(d['createdAt'], ISO_MS)
        self.assertLessEqual(abs(iso_to_ms(d['createdAt']) - t0), scaled(5000))
        self.assertEqual(d['createdBy'], owner.address)
        self.assertEqual((d['revoked'], d['revokedAt'], d['revokedBy'], d['reason']),
                         (False, None, None, None))
        p = self.prog(owner, eid, m)
        self.assertEqual(set(p), {'member', 'xp', 'rank', 'skills', 'levels', 'level'})
        self.assertEqual((p['member'], p['xp'], p['rank'], p['levels'], p['level']),
                         (m, 8, 1, [], None))
        self.assertEqual(sorted(p['skills'], key=lambda s: s['skillId']),
                         sorted([{'skillId': s1, 'name': 'Skill 0', 'score': 5, 'total': 5},
                                 {'skillId': s2, 'name': 'Skill 1', 'score': 3, 'total': 3}],
                                key=lambda s: s['skillId']))
        # xp explicit (0 with skills), xp only, an empty url, the maximum values
        time.sleep(0.003)  # newest first is by the millisecond
        d2 = self.award_ok(owner, eid, self.contrib(m, [s1], [2], xp=0, title='t'))
        time.sleep(0.003)
        self.assertEqual(d2['xp'], 0)
        d3 = self.award_ok(owner, eid, {'member': m, 'xp': 40, 'title': 'x' * 200, 'url': ''})
        time.sleep(0.003)
        self.assertEqual((d3['xp'], d3['skills']), (40, []))
        self.award_ok(owner, eid, self.contrib(m, [s2], [1000000], xp=1000000000, title='é' * 200))
        p = self.prog(owner, eid, m)
        self.assertEqual(p['xp'], 8 + 0 + 40 + 1000000000)
        self.assertEqual(self.scores(p), {s1: 7, s2: 1000003})
        # the list: newest first, the same records
        cs = self.all_contributions(owner, eid, m)
        self.assertEqual([x['id'] for x in cs][1:], [d3['id'], d2['id'], d['id']])
        self.assertEqual(cs[3], d)
        # a member never awarded: 0 xp, rank null
        other = c['outsider'].address
        self.add_members(owner, eid, other)
        p = self.prog(owner, eid, other)
        self.assertEqual((p['xp'], p['rank'], p['level']), (0, None, None))
        self.assertEqual(self.scores(p).get(s1, 0), 0)

    def test_award_batch_in_request_order(self):
        eid, c, (s1, s2) = self.setup_entity(members=3)
        m1, m2, m3 = (c['member'].address, c['member2'].address, c['member3'].address)
        body = {'contributions': [self.contrib(m1, [s1], [1], title='a'),
                                  self.contrib(m2, [s1, s2], [2, 3], title='b', xp=9),
                                  self.contrib(m3, [], [], title='c', xp=4)]}
        data = self.award_ok(c['admin'], eid, body)
        self.assertIsInstance(data, list)
        self.assertEqual([(x['member'], x['title'], x['xp']) for x in data],
                         [(m1, 'a', 1), (m2, 'b', 9), (m3, 'c', 4)])
        self.assertEqual(len({x['id'] for x in data}), 3)
        for x in data:
            self.assertEqual(x['createdBy'], c['admin'].address)
        self.assertEqual([(e['member'], e['value'], e['rank'])
                          for e in self.board(c['owner'], eid)],
                         [(m2, 9, 1), (m3, 4, 2), (m1, 1, 3)])

    def test_batch_all_or_nothing(self):
        eid, c, (s1, s2) = self.setup_entity(members=2)
        owner = c['owner']
        m1, m2 = c['member'].address, c['member2'].address
        self.assertOk(self.put_level(owner, eid, 'L1', [s1], [1], 1), 201)
        self.award_ok(owner, eid, self.contrib(m1, [s1], [1], title='before'))
        before = self.snapshot(owner, eid, [m1, m2], [s1, s2])
        good = self.contrib(m2, [s1, s2], [4, 4], title='good')
        cases = [
            ([good, self.contrib(rand_addr(), [s1], [1])], 'contributions[1].member'),
            ([good, good, self.contrib(m1, [s1, fake_skill_id()], [1, 1])],
             'contributions[2].skills[1].skillId'),
            ([self.contrib(m1, [s1], [0]), good], 'contributions[0].skills[0].score'),
            ([good, self.contrib(m1, [s1], [1], xp=-1)], 'contributions[1].xp'),
            ([good, self.contrib(m1, [s1], [1], title='')], 'contributions[1].title'),
            ([good, self.contrib(m1, [s1], [1], url='ftp://x.org/')], 'contributions[1].url'),
            ([good, self.contrib(m1, [s1], [1], idempotencyKey='bad key')],
             'contributions[1].idempotencyKey'),
        ]
        for items, field in cases:
            with self.subTest(field=field):
                self.assertEnvelope(self.api.award(owner, eid, {'contributions': items}), 400,
                                    'invalid_request', field)
        after = self.snapshot(owner, eid, [m1, m2], [s1, s2])
        self.assertEqual(after, before)

    # ------------------------------------------------------------------------------------
    # award: every field's error path

    def test_award_bad_input_fields(self):
        eid, c, (s1, s2) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        nonmember = rand_addr()
        mixed_bad = harness.eip55(m)
        mixed_bad = mixed_bad[:2] + mixed_bad[2:].swapcase()
        if mixed_bad[2:].lower() == mixed_bad[2:] or mixed_bad[2:].upper() == mixed_bad[2:]:
            mixed_bad = None
        base = {'member': m, 'skills': [{'skillId': s1, 'score': 1}], 'xp': 3, 'title': 't',
                'url': 'https://example.org/', 'idempotencyKey': 'k1'}

        def with_(**kw):
            b = json.loads(json.dumps(base))
            for k, v in kw.items():
                if v is KeyError:
                    b.pop(k, None)
                else:
                    b[k] = v
            return b

        cases = [
            (with_(member=KeyError), 'member'),
            (with_(member=None), 'member'),
            (with_(member=5), 'member'),
            (with_(member='0x1234'), 'member'),
            (with_(member=m[:-1] + 'g'), 'member'),
            (with_(member=nonmember), 'member'),
            (with_(member=c['outsider'].address), 'member'),
            (with_(skills='s1'), 'skills'),
            (with_(skills=[s1]), ('skills[0]', 'skills[0].skillId')),
            (with_(skills=[{'skillId': fake_skill_id(), 'score': 1}]), 'skills[0].skillId'),
            (with_(skills=[{'skillId': 'nope', 'score': 1}]), 'skills[0].skillId'),
            (with_(skills=[{'skillId': 7, 'score': 1}]), 'skills[0].skillId'),
            (with_(skills=[{'score': 1}]), 'skills[0].skillId'),
            (with_(skills=[{'skillId': s1, 'score': 1}, {'skillId': s1, 'score': 2}]),
             'skills[1].skillId'),
            (with_(skills=[{'skillId': s1, 'score': 1}, {'skillId': s2.upper(), 'score': 2}]),
             'skills[1].skillId'),
            (with_(skills=[{'skillId': s1, 'score': 0}]), 'skills[0].score'),
            (with_(skills=[{'skillId': s1, 'score': -1}]), 'skills[0].score'),
            (with_(skills=[{'skillId': s1, 'score': 1000001}]), 'skills[0].score'),
            (with_(skills=[{'skillId': s1, 'score': 1.5}]), 'skills[0].score'),
            (with_(skills=[{'skillId': s1, 'score': '5'}]), 'skills[0].score'),
            (with_(skills=[{'skillId': s1}]), 'skills[0].score'),
            (with_(skills=[{'skillId': s2, 'score': 1}, {'skillId': s1, 'score': True}]),
             'skills[1].score'),
            (with_(xp=-1), 'xp'),
            (with_(xp=1000000001), 'xp'),
            (with_(xp=2.5), 'xp'),
            (with_(xp='10'), 'xp'),
            (with_(title=KeyError), 'title'),
            (with_(title=''), 'title'),
            (with_(title='x' * 201), 'title'),
            (with_(title='é' * 201), 'title'),
            (with_(title='a\u0001b'), 'title'),
            (with_(title=12), 'title'),
            (with_(url='ftp://example.org/'), 'url'),
            (with_(url='not a url'), 'url'),
            (with_(url='/relative/path'), 'url'),
            (with_(url='https://example.org/' + 'a' * 2030), 'url'),
            (with_(url=3), 'url'),
            (with_(idempotencyKey=''), 'idempotencyKey'),
            (with_(idempotencyKey='has space'), 'idempotencyKey'),
            (with_(idempotencyKey='k' * 65), 'idempotencyKey'),
            (with_(idempotencyKey='k/1'), 'idempotencyKey'),
            (with_(idempotencyKey=5), 'idempotencyKey'),
        ]
        if mixed_bad:
            cases.append((with_(member=mixed_bad), 'member'))
        for body, field in cases:
            with self.subTest(field=field, body=json.dumps(body)[:160]):
                self.assertField(self.api.award(owner, eid, body), field)
        # 33 skills: too many (32 is the most)
        many = [fake_skill_id() for _ in range(33)]
        self.assertEnvelope(self.api.award(owner, eid, with_(
            skills=[{'skillId': s, 'score': 1} for s in many])), 400, 'invalid_request', 'skills')
        # nothing earned: no skills and xp 0
        st, _, body = self.api.award(owner, eid, with_(skills=[], xp=0))
        self.assertEqual(st, 400, body)
        self.assertEqual(body['error']['code'], 'invalid_request', body)
        self.assertIn(body['error'].get('field'), (None, 'xp', 'skills'), body)
        st, _, body = self.api.award(owner, eid, with_(skills=[], xp=KeyError))
        self.assertEqual(st, 400, body)
        # batch envelope
        for items, field in (([], 'contributions'), ('x', 'contributions'),
                             ([with_()] * 101, 'contributions'),
                             ([5], ('contributions[0]', 'contributions[0].member'))):
            with self.subTest(contributions=str(items)[:40]):
                self.assertField(self.api.award(owner, eid, {'contributions': items}), field)
        # not JSON, not an object
        self.assertEnvelope(self.api.award(owner, eid, '{"member":', raw=True), 400,
                            'invalid_json')
        self.assertEnvelope(self.api.award(owner, eid, '[1,2]', raw=True), 400, 'invalid_json')
        # nothing was stored by any of them
        self.assertEqual(self.prog(owner, eid, m)['xp'], 0)
        self.assertEqual(self.all_contributions(owner, eid, m), [])
        self.assertEqual([e for e in self.all_events(owner, eid)
                          if e['type'].startswith('contribution.')], [])
        # the bounds themselves are accepted
        self.award_ok(owner, eid, with_(idempotencyKey='A-z_0' * 12 + 'abcd', xp=1000000000,
                                        url='https://example.org/' + 'a' * 2028))
        # unknown entity: 404; malformed entity id: 404
        self.assertEnvelope(self.api.award(owner, 'c-' + str(uuid.uuid4()), with_()), 404,
                            'not_found')
        self.assertEnvelope(self.api.award(owner, 'c-nope', with_()), 404, 'not_found')

    # ------------------------------------------------------------------------------------
    # idempotency

    def test_idempotent_retry(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        body = self.contrib(m, [s1], [3], title='once', idempotencyKey='retry-1')
        st, _, first = self.api.award(owner, eid, body)
        self.assertEqual(st, 201, first)
        before = self.snapshot(owner, eid, [m], [s1])
        for _ in range(2):
            st, _, again = self.api.award(owner, eid, body)
            self.assertEqual(st, 200, again)
            self.assertIs(again.get('replayed'), True, again)
            self.assertIs(again.get('success'), True, again)
            self.assertEqual(again['data'], first['data'])
        # another caller (an admin) retrying the same request: the same answer
        st, _, again = self.api.award(c['admin'], eid, body)
        self.assertEqual((st, again.get('replayed'), again.get('data')), (200, True,
                                                                           first['data']))
        self.assertEqual(self.snapshot(owner, eid, [m], [s1]), before)
        # the same key, another body: 409, nothing changes
        for other in (dict(body, title='twice'), dict(body, xp=4),
                      self.contrib(m, [s1], [4], title='once', idempotencyKey='retry-1')):
            self.assertEnvelope(self.api.award(owner, eid, other), 409, 'conflict')
        self.assertEqual(self.snapshot(owner, eid, [m], [s1]), before)
        # the key is per entity: another entity takes it as new
        eid2, c2, (t1, _) = self.setup_entity()
        self.award_ok(c2['owner'], eid2, self.contrib(c2['member'].address, [t1], [3],
                                                      title='once', idempotencyKey='retry-1'))
        # a batch retried (its key beside contributions): replayed as a whole
        bbody = {'idempotencyKey': 'b-1',
                 'contributions': [self.contrib(m, [s1], [1], title='b1'),
                                   self.contrib(m, [s1], [2], title='b2')]}
        st, _, bfirst = self.api.award(owner, eid, bbody)
        self.assertEqual(st, 201, bfirst)
        mid = self.snapshot(owner, eid, [m], [s1])
        st, _, bagain = self.api.award(owner, eid, bbody)
        self.assertEqual((st, bagain.get('replayed'), bagain.get('data')),
                         (200, True, bfirst['data']))
        self.assertEqual(self.snapshot(owner, eid, [m], [s1]), mid)
        self.assertEnvelope(self.api.award(owner, eid, dict(bbody, contributions=[
            bbody['contributions'][0]])), 409, 'conflict')
        self.assertEnvelope(self.api.award(owner, eid, dict(bbody, idempotencyKey='b 1')), 400,
                            'invalid_request', 'idempotencyKey')
        self.assertEqual(self.snapshot(owner, eid, [m], [s1]), mid)

    def test_idempotent_parallel_retries(self):
        """20 identical requests with one key at once: exactly one is applied (201), the others
        replay it."""
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        body = self.contrib(m, [s1], [2], title='same', idempotencyKey='par-1')
        auth = self.api.auth(owner)
        results = [None] * 20
        barrier = threading.Barrier(20)

        def run(i):
            try:
                barrier.wait(timeout=scaled(10))
                results[i] = harness.request(self.api.port, 'POST', '/api/entities/%s/'
                                             'contributions?%s' % (eid, auth), body,
                                             timeout=scaled(30))
            except Exception as e:  # noqa: BLE001
                results[i] = e
        ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(20)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=scaled(60))
        statuses = sorted((r[0] if isinstance(r, tuple) else repr(r) for r in results), key=str)
        self.assertEqual(statuses, [200] * 19 + [201], statuses)
        datas = {json.dumps(r[2]['data'], sort_keys=True) for r in results}
        self.assertEqual(len(datas), 1)
        p = self.prog(owner, eid, m)
        self.assertEqual((p['xp'], self.scores(p)), (2, {s1: 2}))
        self.assertEqual(len(self.all_contributions(owner, eid, m)), 1)

    # ------------------------------------------------------------------------------------
    # concurrency

    def test_100_parallel_awards(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        auth = self.api.auth(owner)
        n = 100
        results = [None] * n
        barrier = threading.Barrier(n)

        def run(i):
            try:
                barrier.wait(timeout=scaled(20))
                results[i] = harness.request(
                    self.api.port, 'POST', '/api/entities/%s/contributions?%s' % (eid, auth),
                    self.contrib(m, [s1], [1], title='p%d' % i), timeout=scaled(60))
            except Exception as e:  # noqa: BLE001
                results[i] = e
        ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=scaled(90))
        bad = [r if not isinstance(r, tuple) else (r[0], r[2]) for r in results
               if not isinstance(r, tuple) or r[0] != 201]
        self.assertEqual(bad, [])
        p = self.prog(owner, eid, m)
        self.assertEqual((p['xp'], self.scores(p), p['rank']), (100, {s1: 100}, 1))
        self.assertEqual(self.board(owner, eid, s1), [{'rank': 1, 'member': m, 'value': 100}])
        cs = self.all_contributions(owner, eid, m, limit=7)
        self.assertEqual(sorted(x['title'] for x in cs), sorted('p%d' % i for i in range(n)))
        self.assertEqual(self.check_consistency(owner, eid, [m], [s1]), [])

    # ------------------------------------------------------------------------------------
    # revocation

    def test_revoke(self):
        eid, c, (s1, s2) = self.setup_entity(members=2)
        owner, admin = c['owner'], c['admin']
        m, m2 = c['member'].address, c['member2'].address
        a = self.award_ok(owner, eid, self.contrib(m, [s1, s2], [5, 2], title='a'))
        time.sleep(0.003)
        b = self.award_ok(owner, eid, self.contrib(m, [s1], [1], title='b', xp=10))
        self.award_ok(owner, eid, self.contrib(m2, [s1], [3], title='c'))
        self.assertEqual(self.prog(owner, eid, m)['xp'], 17)
        t0 = int(time.time() * 1000)
        r = self.assertOk(self.api.revoke(admin, eid, a['id'], {'reason': 'duplicate'}))['data']
        self.assertEqual(set(r), CONTRIB_FIELDS)
        self.assertEqual({k: v for k, v in r.items()
                          if k not in ('revoked', 'revokedAt', 'revokedBy', 'reason')},
                         {k: v for k, v in a.items()
                          if k not in ('revoked', 'revokedAt', 'revokedBy', 'reason')})
        self.assertEqual((r['revoked'], r['revokedBy'], r['reason']),
                         (True, admin.address, 'duplicate'))
        self.assertRegex(r['revokedAt'], ISO_MS)
        self.assertLessEqual(abs(iso_to_ms(r['revokedAt']) - t0), scaled(5000))
        p = self.prog(owner, eid, m)
        self.assertEqual(p['xp'], 10)
        self.assertEqual(self.scores(p).get(s1, 0), 1)
        self.assertEqual(self.scores(p).get(s2, 0), 0)
        self.assertEqual(p['rank'], 1)
        self.assertEqual([(e['member'], e['value']) for e in self.board(owner, eid)],
                         [(m, 10), (m2, 3)])
        self.assertEqual([(e['member'], e['value']) for e in self.board(owner, eid, s1)],
                         [(m2, 3), (m, 1)])
        self.assertEqual(self.board(owner, eid, s2), [])
        # the list shows the revoked record in place
        cs = self.all_contributions(owner, eid, m)
        self.assertEqual([x['id'] for x in cs], [b['id'], a['id']])
        self.assertEqual(cs[1], r)
        # revoking again changes nothing and answers the record
        before = self.snapshot(owner, eid, [m, m2], [s1, s2])
        for w in (owner, admin, self.platform):
            again = self.assertOk(self.api.revoke(w, eid, a['id'], {'reason': 'other reason'}))
            self.assertEqual(again['data'], r)
        self.assertEqual(self.snapshot(owner, eid, [m, m2], [s1, s2]), before)
        # the rest taken back: the member leaves the boards, rank null
        self.assertOk(self.api.revoke(owner, eid, b['id'], {'reason': 'x' * 500}))
        p = self.prog(owner, eid, m)
        self.assertEqual((p['xp'], p['rank']), (0, None))
        self.assertEqual([e['member'] for e in self.board(owner, eid)], [m2])
        self.assertEqual([e['member'] for e in self.board(owner, eid, s1)], [m2])
        self.assertEqual(self.check_consistency(owner, eid, [m, m2], [s1, s2]), [])
        revs = [e for e in self.all_events(owner, eid) if e['type'] == 'contribution.revoked']
        self.assertEqual([e['data']['id'] for e in revs], [a['id'], b['id']])
        self.assertEqual(revs[0]['actor'], admin.address)

    def test_parallel_revokes_and_awards(self):
        """Revokes of one contribution racing each other, other revokes and awards at once: each
        contribution is taken back once, and the sums, boards and events agree."""
        eid, c, (s1, s2) = self.setup_entity(members=2)
        owner, admin = c['owner'], c['admin']
        m, m2 = c['member'].address, c['member2'].address
        seed = self.award_ok(owner, eid, {'contributions': [
            self.contrib(m if i % 2 else m2, [s1, s2], [i + 1, 1], title='s%d' % i, xp=10 + i)
            for i in range(20)]})
        target = seed[0]
        others = seed[1:11]
        jobs = []
        for k in range(10):
            jobs.append(('revoke-same', admin if k % 2 else owner,
                         ('/api/entities/%s/contributions/%s/revoke' % (eid, target['id']),
                          {'reason': 'r%d' % k})))
        for x in others:
            jobs.append(('revoke', owner, ('/api/entities/%s/contributions/%s/revoke' %
                                           (eid, x['id']), {'reason': 'other'})))
        for k in range(20):
            jobs.append(('award', admin, ('/api/entities/%s/contributions' % eid,
                                          self.contrib(m if k % 2 else m2, [s1], [2],
                                                       title='a%d' % k))))
        auths = {w.address: self.api.auth(w) for w in (owner, admin)}
        results = [None] * len(jobs)
        barrier = threading.Barrier(len(jobs))

        def run(i):
            kind, w, (path, body) = jobs[i]
            try:
                barrier.wait(timeout=scaled(20))
                results[i] = harness.request(self.api.port, 'POST', path + '?' +
                                             auths[w.address], body, timeout=scaled(60))
            except Exception as e:  # noqa: BLE001
                results[i] = e
        ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(jobs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=scaled(90))
        want = {'revoke-same': 200, 'revoke': 200, 'award': 201}
        bad = [(jobs[i][0], r if not isinstance(r, tuple) else (r[0], r[2]))
               for i, r in enumerate(results)
               if not isinstance(r, tuple) or r[0] != want[jobs[i][0]]]
        self.assertEqual(bad, [])
        same = {json.dumps(results[i][2]['data'], sort_keys=True)
                for i in range(len(jobs)) if jobs[i][0] == 'revoke-same'}
        self.assertEqual(len(same), 1, 'the racing revokes answered different records')
        self.assertTrue(json.loads(same.pop())['revoked'])
        revoked = {target['id']} | {x['id'] for x in others}
        for who in (m, m2):
            xp = sum(x['xp'] for x in seed if x['member'] == who and x['id'] not in revoked)
            xp += 2 * 10
            self.assertEqual(self.prog(owner, eid, who)['xp'], xp, who)
        self.assertEqual(self.check_consistency(owner, eid, [m, m2], [s1, s2]), [])
        board = self.board(owner, eid)
        self.assertEqual({(e['member'], e['value']) for e in board},
                         {(x, self.prog(owner, eid, x)['xp']) for x in (m, m2)})
        revs = [e['data']['id'] for e in self.all_events(owner, eid)
                if e['type'] == 'contribution.revoked']
        self.assertEqual(sorted(revs), sorted(revoked))

    def test_revoke_bad_input(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        a = self.award_ok(owner, eid, self.contrib(m, [s1], [5]))
        for body, field in (({}, 'reason'), ({'reason': ''}, 'reason'),
                            ({'reason': 'x' * 501}, 'reason'), ({'reason': 5}, 'reason'),
                            ({'reason': None}, 'reason'), ({'reason': 'a\u0002'}, 'reason')):
            with self.subTest(body=str(body)[:40]):
                self.assertEnvelope(self.api.revoke(owner, eid, a['id'], body), 400,
                                    'invalid_request', field)
        self.assertEnvelope(self.api.req(
            'POST', '/api/entities/%s/contributions/%s/revoke?%s' % (eid, a['id'],
                                                                      self.api.auth(owner)),
            '[]', {'Content-Type': 'application/json'}), 400, 'invalid_json')
        self.assertEnvelope(self.api.revoke(owner, eid, 'k-' + str(uuid.uuid4()),
                                            {'reason': 'r'}), 404, 'not_found')
        self.assertEnvelope(self.api.revoke(owner, eid, 'k-bad', {'reason': 'r'}), 404,
                            'not_found')
        # a contribution of another entity is unknown here
        eid2, c2, (t1, _) = self.setup_entity()
        other = self.award_ok(c2['owner'], eid2, self.contrib(c2['member'].address, [t1], [1]))
        self.assertEnvelope(self.api.revoke(owner, eid, other['id'], {'reason': 'r'}), 404,
                            'not_found')
        self.assertEqual(self.prog(owner, eid, m)['xp'], 5)

    # ------------------------------------------------------------------------------------
    # levels

    def test_level_reached_threshold_raised_and_lowered(self):
        eid, c, (s1, s2) = self.setup_entity(members=2)
        owner, m, m2 = c['owner'], c['member'].address, c['member2'].address
        self.assertOk(self.put_level(owner, eid, 'L1', [s1, s2], [5, 2], 8), 201)
        self.assertOk(self.put_level(owner, eid, 'L0', [], [], 5), 201)
        self.assertOk(self.put_level(owner, eid, 'L2', [s2], [50], 100), 201)
        p = self.prog(owner, eid, m)
        self.assertEqual([lv['id'] for lv in p['levels']], ['L0', 'L1', 'L2'])
        lv1 = self.level_of(p, 'L1')
        self.assertEqual(set(lv1), {'id', 'name', 'XP', 'requires', 'reached', 'unlocked',
                                    'reachedAt', 'missing'})
        self.assertEqual((lv1['name'], lv1['XP'], lv1['reached'], lv1['reachedAt']),
                         ('Level L1', 8, False, None))
        self.assertEqual(lv1['missing'], {'xp': 8, 'skills': [
            {'skillId': s1, 'need': 5, 'have': 0}, {'skillId': s2, 'need': 2, 'have': 0}],
            'levels': []})
        # partly there: s1 met, s2 not, xp not (L0 reached)
        self.award_ok(owner, eid, self.contrib(m, [s1], [6]))
        p = self.prog(owner, eid, m)
        lv1 = self.level_of(p, 'L1')
        self.assertEqual((self.level_of(p, 'L0')['reached'], p['level']), (True, 'L0'))
        self.assertEqual((lv1['reached'], lv1['missing']), (False, {'xp': 2, 'skills': [
            {'skillId': s2, 'need': 2, 'have': 0}], 'levels': []}))
        t0 = int(time.time() * 1000)
        self.award_ok(owner, eid, self.contrib(m, [s2], [2]))
        p = self.prog(owner, eid, m)
        lv1, lv0 = self.level_of(p, 'L1'), self.level_of(p, 'L0')
        self.assertEqual((lv1['reached'], lv1['missing']),
                         (True, {'xp': 0, 'skills': [], 'levels': []}))
        self.assertEqual(lv0['reached'], True)
        self.assertRegex(lv1['reachedAt'], ISO_MS)
        self.assertLessEqual(abs(iso_to_ms(lv1['reachedAt']) - t0), scaled(5000))
        self.assertEqual(p['level'], 'L1')
        reached_at = lv1['reachedAt']
        self.award_ok(owner, eid, {'member': m, 'xp': 5, 'title': 'more'})
        p = self.prog(owner, eid, m)
        self.assertEqual(self.level_of(p, 'L1')['reachedAt'], reached_at)
        self.assertTrue(self.level_of(p, 'L0')['reached'])
        self.assertEqual(p['level'], 'L1')  # the highest XP reached
        # raise L1's threshold: not reached any more, reachedAt kept
        self.assertOk(self.put_level(owner, eid, 'L1', [s1, s2], [5, 3], 8))
        p = self.prog(owner, eid, m)
        lv1 = self.level_of(p, 'L1')
        self.assertEqual((lv1['reached'], lv1['reachedAt']), (False, reached_at))
        self.assertEqual(lv1['missing'], {'xp': 0, 'skills': [
            {'skillId': s2, 'need': 3, 'have': 2}], 'levels': []})
        self.assertEqual(p['level'], 'L0')
        self.assertOk(self.put_level(owner, eid, 'L1', [s1, s2], [5, 2], 14))
        lv1 = self.level_of(self.prog(owner, eid, m), 'L1')
        self.assertEqual((lv1['reached'], lv1['missing']),
                         (False, {'xp': 1, 'skills': [], 'levels': []}))
        # lowered again: reached at once
        self.assertOk(self.put_level(owner, eid, 'L1', [s1, s2], [5, 2], 13))
        p = self.prog(owner, eid, m)
        self.assertEqual((self.level_of(p, 'L1')['reached'], self.level_of(p, 'L1')['reachedAt'],
                          p['level']), (True, reached_at, 'L1'))
        # lowering L2 for a member that never reached it: reached, with no award (no reachedAt)
        self.award_ok(owner, eid, self.contrib(m2, [s2], [1], xp=1))
        self.assertFalse(self.level_of(self.prog(owner, eid, m2), 'L2')['reached'])
        self.assertOk(self.put_level(owner, eid, 'L2', [s2], [1], 1))
        p2 = self.prog(owner, eid, m2)
        lv2 = self.level_of(p2, 'L2')
        self.assertEqual((lv2['reached'], lv2['reachedAt'], lv2['missing'], p2['level']),
                         (True, None, {'xp': 0, 'skills': [], 'levels': []}, 'L2'))
        self.assertEqual([lv['id'] for lv in p2['levels']], ['L2', 'L0', 'L1'])
        # level.reached written once per member and level, by the award that reached it
        reached = [(e['data']['member'], e['data']['level'])
                   for e in self.all_events(owner, eid) if e['type'] == 'level.reached']
        self.assertEqual(sorted(reached), sorted([(m, 'L1'), (m, 'L0')]))

    def test_level_ends_at(self):
        eid, c, (s1, _) = self.setup_entity(members=3)
        owner = c['owner']
        m, m2, m3 = c['member'].address, c['member2'].address, c['member3'].address
        # a level whose endsAt has passed before any award: never reached
        self.assertOk(self.put_level(owner, eid, 'past', [s1], [1], 1,
                                     ends_at='2020-01-01T00:00:00.000Z'), 201)
        self.assertOk(self.put_level(owner, eid, 'open', [s1], [1], 1), 201)
        self.award_ok(owner, eid, self.contrib(m, [s1], [2]))
        p = self.prog(owner, eid, m)
        past, open_ = self.level_of(p, 'past'), self.level_of(p, 'open')
        self.assertEqual((past['reached'], past['reachedAt']), (False, None))
        self.assertTrue(open_['reached'])
        self.assertEqual(p['level'], 'open')
        ra = iso_to_ms(open_['reachedAt'])
        # endsAt moved to just after the recorded reachedAt (now past): still reached
        self.assertOk(self.put_level(owner, eid, 'open', [s1], [1], 1,
                                     ends_at=harness.iso_ms(ra + 1)))
        time.sleep(0.01)
        p = self.prog(owner, eid, m)
        self.assertTrue(self.level_of(p, 'open')['reached'])
        # a member meeting it now, after endsAt: not reached, nothing recorded
        self.award_ok(owner, eid, self.contrib(m2, [s1], [5]))
        lv = self.level_of(self.prog(owner, eid, m2), 'open')
        self.assertEqual((lv['reached'], lv['reachedAt']), (False, None))
        # endsAt moved before the reachedAt: not reached, reachedAt kept
        self.assertOk(self.put_level(owner, eid, 'open', [s1], [1], 1,
                                     ends_at=harness.iso_ms(ra - 1)))
        lv = self.level_of(self.prog(owner, eid, m), 'open')
        self.assertEqual((lv['reached'], lv['reachedAt']), (False, harness.iso_ms(ra)))
        # endsAt in the future: reached for anyone meeting it
        self.assertOk(self.put_level(owner, eid, 'open', [s1], [1], 1,
                                     ends_at='2999-01-01T00:00:00.000Z'))
        self.assertTrue(self.level_of(self.prog(owner, eid, m), 'open')['reached'])
        self.assertTrue(self.level_of(self.prog(owner, eid, m2), 'open')['reached'])
        # endsAt passing while a member holds it: one reached before it stays reached
        # Far enough ahead for the level and the award below on a loaded machine.
        soon = int(time.time() * 1000) + int(scaled(3000))
        self.assertOk(self.put_level(owner, eid, 'soon', [s1], [3], 0,
                                     ends_at=harness.iso_ms(soon)), 201)
        self.award_ok(owner, eid, self.contrib(m, [s1], [1]))   # m: 3, reaches 'soon'
        lv = self.level_of(self.prog(owner, eid, m), 'soon')
        self.assertTrue(lv['reached'])
        self.assertLess(iso_to_ms(lv['reachedAt']), soon)
        wait = soon - int(time.time() * 1000) + 50
        if wait > 0:
            time.sleep(wait / 1000)
        self.award_ok(owner, eid, self.contrib(m3, [s1], [3]))
        self.assertTrue(self.level_of(self.prog(owner, eid, m), 'soon')['reached'])
        lv = self.level_of(self.prog(owner, eid, m3), 'soon')
        self.assertEqual((lv['reached'], lv['reachedAt']), (False, None))
        reached = [(e['data']['member'], e['data']['level'])
                   for e in self.all_events(owner, eid) if e['type'] == 'level.reached']
        self.assertEqual(sorted(reached), sorted([(m, 'open'), (m, 'soon'), (m3, 'open')]))

    def test_revoke_keeps_reached_at(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        self.assertOk(self.put_level(owner, eid, 'L', [s1], [5], 5), 201)
        a = self.award_ok(owner, eid, self.contrib(m, [s1], [5]))
        ra = self.level_of(self.prog(owner, eid, m), 'L')['reachedAt']
        self.assertIsNotNone(ra)
        self.assertOk(self.api.revoke(owner, eid, a['id'], {'reason': 'wrong'}))
        p = self.prog(owner, eid, m)
        lv = self.level_of(p, 'L')
        self.assertEqual((lv['reached'], lv['reachedAt'], p['level']), (False, ra, None))
        self.assertEqual(lv['missing'], {'xp': 5, 'skills': [
            {'skillId': s1, 'need': 5, 'have': 0}], 'levels': []})
        # earned again: reached, the first reachedAt kept, no second level.reached
        self.award_ok(owner, eid, self.contrib(m, [s1], [6]))
        p = self.prog(owner, eid, m)
        self.assertEqual((self.level_of(p, 'L')['reached'], self.level_of(p, 'L')['reachedAt'],
                          p['level']), (True, ra, 'L'))
        self.assertEqual(len([e for e in self.all_events(owner, eid)
                              if e['type'] == 'level.reached']), 1)

    # ------------------------------------------------------------------------------------
    # leaderboard

    def test_leaderboard_ranks_and_ties(self):
        eid, c, (s1, s2) = self.setup_entity()
        owner = c['owner']
        addrs = sorted(rand_addr() for _ in range(6))
        self.add_members(owner, eid, *addrs)
        a, b, cc, d, e, zero = addrs
        vals = {d: 50, e: 30, b: 30, a: 10, cc: 5}
        body = {'contributions': [{'member': x, 'xp': v, 'title': 't'} for x, v in vals.items()]}
        self.award_ok(owner, eid, body)
        want = [(1, d, 50), (2, b, 30), (2, e, 30), (4, a, 10), (5, cc, 5)]
        got = [(x['rank'], x['member'], x['value']) for x in self.board(owner, eid)]
        self.assertEqual(got, want)
        for rank, x, _ in want:
            self.assertEqual(self.prog(owner, eid, x)['rank'], rank)
        self.assertEqual(self.prog(owner, eid, zero)['rank'], None)
        # three-way tie: 1, 2, 2, 2, 5
        self.award_ok(owner, eid, {'member': a, 'xp': 20, 'title': 't'})
        got = [(x['rank'], x['member'], x['value']) for x in self.board(owner, eid)]
        self.assertEqual(got, [(1, d, 50), (2, a, 30), (2, b, 30), (2, e, 30), (5, cc, 5)])
        # by skill
        self.award_ok(owner, eid, {'contributions': [
            self.contrib(e, [s1], [7]), self.contrib(cc, [s1, s2], [7, 1]),
            self.contrib(a, [s1], [2])]})
        self.assertEqual([(x['rank'], x['member'], x['value']) for x in self.board(owner, eid, s1)],
                         sorted([(1, cc, 7), (1, e, 7)]) + [(3, a, 2)])
        self.assertEqual(self.board(owner, eid, s2), [{'rank': 1, 'member': cc, 'value': 1}])
        # pages of every size give the same list; the default limit is 20
        full = self.board(owner, eid)
        for limit in (1, 2, 3, 5):
            self.assertEqual(self.board(owner, eid, limit=limit), full)
        page = self.assertOk(self.api.leaderboard(owner, eid, 'xp', '&limit=5'))
        self.assertIsNone(page['nextCursor'])
        page = self.assertOk(self.api.leaderboard(owner, eid, 'xp', '&limit=2'))
        self.assertIsInstance(page['nextCursor'], str)
        many = [rand_addr() for _ in range(25)]
        self.add_members(owner, eid, *many)
        self.award_ok(owner, eid, {'contributions': [{'member': x, 'xp': 1, 'title': 't'}
                                                     for x in many]})
        page = self.assertOk(self.api.leaderboard(owner, eid, 'xp'))
        self.assertEqual(len(page['data']), 20)
        self.assertIsNotNone(page['nextCursor'])
        full = self.board(owner, eid)
        self.assertEqual(len(full), 30)
        self.assertEqual([x['rank'] for x in full[5:]], [6] * 25)
        self.assertEqual([x['member'] for x in full[5:]], sorted(many))

    def test_leaderboard_bad_input(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        self.award_ok(owner, eid, self.contrib(m, [s1], [1]))
        self.add_members(owner, eid, rand_addr())
        page = self.assertOk(self.api.leaderboard(owner, eid, 'xp', '&limit=1'))
        for by in (fake_skill_id(), 'nope', 's-', 'XP', 'xp2', s1.upper()):
            with self.subTest(by=by):
                self.assertEnvelope(self.api.leaderboard(owner, eid, by), 400,
                                    'invalid_request', 'by')
        # a skill of another entity is unknown here
        eid2, c2, (t1, _) = self.setup_entity()
        self.assertEnvelope(self.api.leaderboard(owner, eid, t1), 400, 'invalid_request', 'by')
        st, _, body = self.api.req('GET', '/api/entities/%s/leaderboard?by=xp&by=xp&%s' %
                                   (eid, self.api.auth(owner)))
        self.assertEqual((st, body['error']['code']), (400, 'invalid_request'), body)
        for bad in ('0', '101', '-1', 'abc', '', '1.5'):
            with self.subTest(limit=bad):
                self.assertEnvelope(self.api.leaderboard(owner, eid, 'xp', '&limit=' + bad), 400,
                                    'invalid_request', 'limit')
        for bad in ('zz', 'abc', '%00'):
            with self.subTest(cursor=bad):
                self.assertEnvelope(self.api.leaderboard(owner, eid, 'xp', '&cursor=' + bad),
                                    400, 'invalid_request', 'cursor')
        self.assertOk(self.api.leaderboard(owner, eid, 'xp', '&limit=100'))
        self.assertOk(self.api.leaderboard(owner, eid, s1, '&limit=1'))
        self.assertIsNotNone(page)

    def test_leaderboard_pages_under_concurrent_awards(self):
        """Paging while other members' values only grow: no member twice, and every member whose
        value did not change is on some page (SPEC-18 paging)."""
        eid, c, (s1, _) = self.setup_entity()
        owner = c['owner']
        rng = random.Random(18)
        static = [rand_addr() for _ in range(30)]
        movers = [rand_addr() for _ in range(15)]
        self.add_members(owner, eid, *(static + movers))
        init = {x: rng.randint(1, 40) * 10 for x in static + movers}
        self.award_ok(owner, eid, {'contributions': [{'member': x, 'xp': v, 'title': 'i'}
                                                     for x, v in init.items()]})
        auth = self.api.auth(owner)
        stop = threading.Event()
        errors = []
        awarded = []

        def mover():
            for i in range(2000):
                if stop.is_set():
                    return
                x = rng.choice(movers)
                try:
                    st, _, body = harness.request(
                        self.api.port, 'POST', '/api/entities/%s/contributions?%s' % (eid, auth),
                        {'member': x, 'xp': rng.choice((1, 7, 35, 120)), 'title': 'm%d' % i},
                        timeout=scaled(15))
                    if st != 201:
                        errors.append((st, body))
                        return
                    awarded.append(x)
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))
                    return
        for rounds in range(3):
            t = threading.Thread(target=mover, daemon=True)
            t.start()
            seen, cursor = [], None
            try:
                for _ in range(200):
                    extra = '&limit=3' + ('&cursor=%s' % cursor if cursor else '')
                    page = self.assertOk(self.api.leaderboard(owner, eid, 'xp', extra))
                    rows = page['data']
                    self.assertLessEqual(len(rows), 3)
                    keys = [(-r['value'], r['member']) for r in rows]
                    self.assertEqual(keys, sorted(keys), rows)
                    self.assertEqual([r['rank'] for r in rows], sorted(r['rank'] for r in rows))
                    seen.extend(r['member'] for r in rows)
                    cursor = page['nextCursor']
                    if cursor is None:
                        break
                    time.sleep(0.005)
                else:
                    self.fail('leaderboard: too many pages')
            finally:
                stop.set()
                t.join(timeout=scaled(30))
                stop.clear()
            self.assertEqual(errors, [])
            dup = sorted({x for x in seen if seen.count(x) > 1})
            self.assertEqual(dup, [], 'round %d: members on two pages' % rounds)
            missing = sorted(set(static) - set(seen))
            self.assertEqual(missing, [], 'round %d: unchanged members skipped' % rounds)
        self.assertGreater(len(awarded), 0)
        final = self.board(owner, eid)
        self.assertEqual(sorted(x['member'] for x in final), sorted(static + movers))

    # ------------------------------------------------------------------------------------
    # contributions of a member

    def test_contributions_list_paging(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        ids = []
        for k in range(5):
            data = self.award_ok(owner, eid, {'contributions': [
                self.contrib(m, [s1], [1], title='c%d-%d' % (k, j)) for j in range(5)]})
            ids.append([d['id'] for d in data])
        # newest first, ties (one request, or two in the same millisecond) by id descending;
        # each once
        full = self.all_contributions(owner, eid, m)
        self.assertEqual(len(full), 25)
        self.assertEqual({x['id'] for x in full}, {i for b in ids for i in b})
        order = [(x['createdAt'], x['id']) for x in full]
        self.assertEqual(order, sorted(order, reverse=True))
        for limit in (1, 4, 7, 25, 100):
            self.assertEqual(self.all_contributions(owner, eid, m, limit=limit), full)
        page = self.assertOk(self.api.contributions(owner, eid, m))
        self.assertEqual((page['data'], page['nextCursor'] is not None), (full[:20], True))
        page = self.assertOk(self.api.contributions(owner, eid, m, '&limit=25'))
        self.assertIsNone(page['nextCursor'])
        for bad in ('0', '101', '-1', 'abc', '', '2.5'):
            with self.subTest(limit=bad):
                self.assertEnvelope(self.api.contributions(owner, eid, m, '&limit=' + bad), 400,
                                    'invalid_request', 'limit')
        for bad in ('zz', 'abc', '%00'):
            with self.subTest(cursor=bad):
                self.assertEnvelope(self.api.contributions(owner, eid, m, '&cursor=' + bad), 400,
                                    'invalid_request', 'cursor')
        # another member: an empty list
        other = rand_addr()
        self.add_members(owner, eid, other)
        self.assertEqual(self.assertOk(self.api.contributions(owner, eid, other)), {
            'success': True, 'data': [], 'nextCursor': None})

    # ------------------------------------------------------------------------------------
    # events

    def test_events_each_change_once_in_order(self):
        owner, admin, member = self.wallets(3)
        eid = self.create_entity(owner)
        t0 = int(time.time() * 1000)
        self.add_admins(owner, eid, admin.address)
        extra = rand_addr()
        self.add_members(admin, eid, member.address, extra)
        self.add_members(owner, eid, member.address)          # nothing added: no event
        s1 = self.add_skill(owner, eid, 'Alpha')
        multi = self.assertOk(self.api.req('POST', '/api/skills/multiple?' +
                                           self.api.auth(admin),
                                           {'names': ['Beta', 'Gamma'], 'entityID': eid}), 201)
        s2, s3 = [s['id'] for s in multi['data']]
        self.assertOk(self.put_level(owner, eid, 'L1', [s1], [2], 3), 201)
        self.assertOk(self.put_level(admin, eid, 'L1', [s1], [3], 3))
        self.assertOk(self.update_entity(owner, eid))
        batch = self.award_ok(admin, eid, {'contributions': [
            self.contrib(member.address, [s1], [1], title='one'),
            self.contrib(member.address, [s1, s2], [2, 1], title='two')]})
        self.assertOk(self.api.revoke(owner, eid, batch[0]['id'], {'reason': 'dup'}))
        self.remove_admin(owner, eid, admin.address)
        # refused writes leave no event
        self.assertEnvelope(self.api.award(owner, eid, self.contrib(rand_addr(), [s1], [1])),
                            400, 'invalid_request', 'member')
        evs = self.all_events(owner, eid)
        self.assertEqual([e['type'] for e in evs], [
            'admin.added', 'member.added', 'skill.added'] +
            ['skill.added'] * (len(evs) - 11) + [
            'level.updated', 'level.updated', 'entity.updated', 'contribution.added',
            'contribution.added', 'level.reached', 'contribution.revoked', 'admin.removed'])
        for e in evs:
            self.assertEqual(set(e), {'id', 'type', 'at', 'actor', 'data'}, e)
            self.assertIn(e['type'], EVENT_TYPES)
            self.assertRegex(e['at'], ISO_MS)
            self.assertIsInstance(e['data'], dict)
            self.assertIsInstance(e['id'], str)
        ats = [iso_to_ms(e['at']) for e in evs]
        self.assertEqual(ats, sorted(ats))
        self.assertGreaterEqual(ats[0], t0 - 1000)
        self.assertEqual(len({e['id'] for e in evs}), len(evs))
        by_type = {}
        for e in evs:
            by_type.setdefault(e['type'], []).append(e)
        actors = [(e['type'], e['actor']) for e in evs]
        self.assertEqual(actors[0], ('admin.added', owner.address))
        self.assertEqual(actors[1], ('member.added', admin.address))
        self.assertEqual(sorted(by_type['member.added'][0]['data']['addresses']),
                         sorted([member.address, extra]))
        self.assertEqual(by_type['admin.added'][0]['data']['addresses'], [admin.address])
        self.assertEqual(by_type['admin.removed'][0]['data']['address'], admin.address)
        skill_ids = [i for e in by_type['skill.added'] for i in e['data']['ids']]
        self.assertEqual(skill_ids, [s1, s2, s3])
        self.assertEqual([(e['data']['id'], e['data']['created']) for e in by_type['level.updated']],
                         [('L1', True), ('L1', False)])
        self.assertEqual([e['actor'] for e in by_type['level.updated']],
                         [owner.address, admin.address])
        self.assertEqual(by_type['entity.updated'][0]['data'].get('__v'), 1)
        self.assertEqual([(e['data']['id'], e['data']['member'], e['actor'])
                          for e in by_type['contribution.added']],
                         [(batch[0]['id'], member.address, admin.address),
                          (batch[1]['id'], member.address, admin.address)])
        self.assertEqual((by_type['level.reached'][0]['data']['member'],
                          by_type['level.reached'][0]['data']['level']), (member.address, 'L1'))
        self.assertEqual((by_type['contribution.revoked'][0]['data']['id'],
                          by_type['contribution.revoked'][0]['actor']),
                         (batch[0]['id'], owner.address))
        # cursors: every page size gives the same list; after the last: nothing
        for limit in (1, 2, 5):
            self.assertEqual(self.all_events(owner, eid, limit=limit), evs)
        for k in (0, 3, len(evs) - 2):
            page = self.assertOk(self.api.events(owner, eid, '&after=' + evs[k]['id']))
            self.assertEqual(page['data'], evs[k + 1:])
            self.assertIsNone(page['nextCursor'])
        page = self.assertOk(self.api.events(owner, eid, '&after=' + evs[-1]['id']))
        self.assertEqual((page['data'], page['nextCursor']), ([], None))
        page = self.assertOk(self.api.events(owner, eid, '&limit=3'))
        self.assertEqual((page['data'], page['nextCursor']), (evs[:3], evs[2]['id']))
        # a new event shows up after the last cursor
        self.award_ok(owner, eid, {'member': member.address, 'xp': 1, 'title': 'later'})
        page = self.assertOk(self.api.events(owner, eid, '&after=' + evs[-1]['id']))
        self.assertEqual([e['type'] for e in page['data']], ['contribution.added'])

    def test_events_bad_input_and_default_limit(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, m = c['owner'], c['member'].address
        self.award_ok(owner, eid, {'contributions': [{'member': m, 'xp': 1, 'title': str(i)}
                                                     for i in range(100)]})
        self.award_ok(owner, eid, {'contributions': [{'member': m, 'xp': 1, 'title': str(i)}
                                                     for i in range(10)]})
        page = self.assertOk(self.api.events(owner, eid))
        self.assertEqual(len(page['data']), 100)
        self.assertEqual(page['nextCursor'], page['data'][-1]['id'])
        page = self.assertOk(self.api.events(owner, eid, '&limit=1000'))
        self.assertIsNone(page['nextCursor'])
        n = len(page['data'])
        self.assertEqual(len([e for e in page['data'] if e['type'] == 'contribution.added']), 110)
        self.assertEqual(n, 110 + 4)  # admin.added, member.added, skill.added x2
        for bad in ('0', '1001', '-1', 'abc', '', '1.5'):
            with self.subTest(limit=bad):
                self.assertEnvelope(self.api.events(owner, eid, '&limit=' + bad), 400,
                                    'invalid_request', 'limit')
        for bad in ('zz', 'abc', '1-2-3', '%00', 'x' * 80):
            with self.subTest(after=bad):
                self.assertEnvelope(self.api.events(owner, eid, '&after=' + bad), 400,
                                    'invalid_request', 'after')

    # ------------------------------------------------------------------------------------
    # roles

    def role_matrix(self, public):
        eid, c, (s1, _) = self.setup_entity(public=public, members=2)
        owner, admin, member, member2 = c['owner'], c['admin'], c['member'], c['member2']
        outsider, platform = c['outsider'], self.platform
        m = member.address
        first = self.award_ok(owner, eid, self.contrib(m, [s1], [1], title='seed'))
        # award and revoke: owners, admins, platform admins
        for who, w, st in (('owner', owner, 201), ('admin', admin, 201),
                           ('platform', platform, 201), ('member', member, 403),
                           ('member2', member2, 403), ('outsider', outsider, 403)):
            with self.subTest(action='award', who=who, public=public):
                resp = self.api.award(w, eid, self.contrib(m, [s1], [1], title=who))
                if st == 201:
                    self.assertOk(resp, 201)
                else:
                    self.assertEnvelope(resp, st, 'forbidden')
        for who, w in (('member', member), ('member2', member2), ('outsider', outsider)):
            with self.subTest(action='revoke', who=who, public=public):
                self.assertEnvelope(self.api.revoke(w, eid, first['id'], {'reason': 'r'}), 403,
                                    'forbidden')
        for who, w in (('admin', admin), ('platform', platform), ('owner', owner)):
            with self.subTest(action='revoke', who=who, public=public):
                self.assertOk(self.api.revoke(w, eid, first['id'], {'reason': who}))
        # reads: the read rule, or the member themself
        readers = (('owner', owner, True), ('admin', admin, True), ('platform', platform, True),
                   ('member', member, True), ('member2', member2, True),
                   ('outsider', outsider, public))
        for who, w, allowed in readers:
            for action, call in (('progress', lambda: self.api.progress(w, eid, m)),
                                 ('contributions', lambda: self.api.contributions(w, eid, m)),
                                 ('leaderboard', lambda: self.api.leaderboard(w, eid))):
                with self.subTest(action=action, who=who, public=public):
                    resp = call()
                    if allowed:
                        self.assertOk(resp)
                    else:
                        self.assertEnvelope(resp, 403, 'forbidden')
        # the member themself, reading their own
        self.assertEqual(self.prog(member, eid, m)['xp'], 3)
        self.assertEqual(len(self.assertOk(self.api.contributions(member, eid, m))['data']), 4)
        # events: owners and admins (and platform admins) only
        for who, w, allowed in (('owner', owner, True), ('admin', admin, True),
                                ('platform', platform, True), ('member', member, False),
                                ('outsider', outsider, False)):
            with self.subTest(action='events', who=who, public=public):
                resp = self.api.events(w, eid)
                if allowed:
                    self.assertOk(resp)
                else:
                    self.assertEnvelope(resp, 403, 'forbidden')
        # unsigned or badly signed: 401
        for path, method, body in (
                ('/api/entities/%s/contributions' % eid, 'POST',
                 self.contrib(m, [s1], [1])),
                ('/api/entities/%s/contributions/%s/revoke' % (eid, first['id']), 'POST',
                 {'reason': 'r'}),
                ('/api/entities/%s/members/%s/progress' % (eid, m), 'GET', None),
                ('/api/entities/%s/members/%s/contributions' % (eid, m), 'GET', None),
                ('/api/entities/%s/leaderboard?by=xp' % eid, 'GET', None),
                ('/api/entities/%s/events' % eid, 'GET', None)):
            sep = '&' if '?' in path else '?'
            with self.subTest(unsigned=path, public=public):
                self.assertEnvelope(self.api.req(method, path, body), 400, 'invalid_request',
                                    'address')
                self.assertEqual(self.api.req(method, path + sep + 'address=' + owner.address,
                                              body)[0], 401)
                bad = self.api._creds[owner.address][1]
                bad = bad[:10] + ('0' if bad[10] != '0' else '1') + bad[11:]
                self.assertEqual(self.api.req(method, path + sep + harness.auth_query(
                    owner.address, bad), body)[0], 401)
        return eid, c

    def test_roles_public_entity(self):
        self.role_matrix(True)

    def test_roles_private_entity(self):
        self.role_matrix(False)

    def test_disabled_entity(self):
        eid, c, (s1, _) = self.setup_entity()
        owner, admin, m = c['owner'], c['admin'], c['member'].address
        a = self.award_ok(owner, eid, self.contrib(m, [s1], [2]))
        body = {'name': 'Disabled', 'description': '', 'ownerAddresses': [owner.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'isEnabled': False}
        self.assertOk(self.api.req('POST', '/api/entities?entityID=%s&%s' %
                                   (eid, self.api.auth(self.platform)), body))
        for w in (owner, admin):
            self.assertEnvelope(self.api.award(w, eid, self.contrib(m, [s1], [1])), 403,
                                'forbidden')
            self.assertEnvelope(self.api.revoke(w, eid, a['id'], {'reason': 'r'}), 403,
                                'forbidden')
        for w in (admin, c['member'], c['outsider']):
            self.assertEnvelope(self.api.progress(w, eid, m), 404, 'not_found')
            self.assertEnvelope(self.api.leaderboard(w, eid), 404, 'not_found')
            self.assertEnvelope(self.api.contributions(w, eid, m), 404, 'not_found')
        for w in (owner, self.platform):
            self.assertEqual(self.prog(w, eid, m)['xp'], 2)
            self.assertOk(self.api.events(w, eid))
        self.assertEnvelope(self.api.events(admin, eid), 404, 'not_found')


class EventsMaxTest(ProgressionBase):
    """EVENTS_MAX=100: the stream stays bounded near it (approximate trimming), oldest dropped."""

    def test_events_trimmed(self):
        self.pool = harness.Wallet.random(5)
        r = self.redis()
        svc = self.entityd(redis=r, env={'EVENTS_MAX': '100'})
        self.api = Api(svc.port)
        eid, c, (s1,) = self.setup_entity(members=1, skills=1)
        owner, m = c['owner'], c['member'].address
        last = None
        lens = []
        early = self.all_events(owner, eid)[1]['id']
        for k in range(8):
            data = self.award_ok(owner, eid, {'contributions': [
                {'member': m, 'xp': 1, 'title': 'b%d-%d' % (k, i)} for i in range(100)]})
            last = data[-1]['id']
            lens.append(r.cli('XLEN', 'ent:{%s}:events' % eid))
        self.assertTrue(all(n <= 250 for n in lens), lens)
        evs = self.all_events(owner, eid)
        self.assertGreaterEqual(len(evs), 100)
        self.assertLessEqual(len(evs), 250)
        self.assertEqual(evs[-1]['data']['id'], last)
        # the oldest dropped first: what is kept is the tail
        self.assertTrue(all(e['type'] == 'contribution.added' for e in evs))
        titles = [int(e['data']['id'] == last) for e in evs]
        self.assertEqual(sum(titles), 1)
        self.assertEqual(self.prog(owner, eid, m)['xp'], 800)
        # an after older than the oldest kept: from the oldest kept
        page = self.assertOk(self.api.events(owner, eid, '&limit=5&after=' + early))
        self.assertEqual(page['data'], evs[:5])


class FaultTest(ProgressionBase):
    """An award whose answer times out (DEBUG SLEEP in Redis, REDIS_TIMEOUT_MS 300), retried with
    the same idempotency key: applied once. No score without its contribution and its event."""

    def call(self, fn, what, timeout=None):
        """fn() until its status is neither 503 nor 504 (bounded)."""
        deadline = time.monotonic() + (timeout or scaled(20))
        last = None
        while time.monotonic() < deadline:
            try:
                last = fn()
            except OSError as e:
                last = (None, {}, repr(e))
            if last[0] not in (None, 503, 504):
                return last
            time.sleep(0.1)
        self.fail('%s: still %r after the deadline' % (what, last[:1] + last[2:]))

    def test_award_timeout_retried_once(self):
        """Awards from 6 clients, each retried with its key until answered, while Redis sleeps
        (DEBUG SLEEP) three times: some answers time out after the script ran, some before it
        was sent; every key ends applied exactly once."""
        self.pool = harness.Wallet.random(4)
        r = self.redis(extra_args=['--enable-debug-command', 'local'])
        svc = self.entityd(redis=r, env={'REDIS_TIMEOUT_MS': '300'})
        self.api = Api(svc.port)
        eid, c, (s1, s2) = self.setup_entity(members=1, skills=2)
        owner, m = c['owner'], c['member'].address
        self.assertOk(self.put_level(owner, eid, 'L', [s1], [3], 3), 201)
        auth = self.api.auth(owner)
        stop = threading.Event()
        lock = threading.Lock()
        outcomes = {}     # key -> [statuses of its tries]
        problems = []

        def client(k):
            for i in range(1000):
                if stop.is_set():
                    return
                key = 'f%d-%d' % (k, i)
                body = self.contrib(m, [s1, s2], [1, 2], title=key, idempotencyKey=key)
                tries = []
                deadline = time.monotonic() + scaled(20)
                while time.monotonic() < deadline:
                    try:
                        st, _, ans = harness.request(
                            svc.port, 'POST', '/api/entities/%s/contributions?%s' % (eid, auth),
                            body, timeout=scaled(15))
                    except OSError as e:
                        st, ans = None, repr(e)
                    tries.append(st)
                    if st in (200, 201):
                        if st == 200 and (ans.get('replayed') is not True or
                                          tries[:-1].count(None) + tries.count(503) +
                                          tries.count(504) == 0):
                            problems.append((key, tries, ans))
                        break
                    if st not in (None, 503, 504):
                        problems.append((key, tries, ans))
                        return
                    time.sleep(0.05)
                else:
                    problems.append((key, tries, 'never answered'))
                    return
                with lock:
                    outcomes[key] = tries
        ts = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(6)]
        for t in ts:
            t.start()
        try:
            for _ in range(3):
                time.sleep(0.4)
                r.cli('DEBUG', 'SLEEP', '0.8', timeout=scaled(10))
            time.sleep(0.5)
        finally:
            stop.set()
            for t in ts:
                t.join(timeout=scaled(60))
        self.assertEqual(problems, [])
        timed_out = [k for k, v in outcomes.items() if len(v) > 1]
        self.assertGreater(len(timed_out), 0, 'no award timed out')
        cs = self.all_contributions(owner, eid, m)
        titles = sorted(x['title'] for x in cs)
        self.assertEqual(titles, sorted(outcomes), 'each key applied exactly once')
        n = len(outcomes)
        p = self.prog(owner, eid, m)
        self.assertEqual((p['xp'], self.scores(p)), (3 * n, {s1: n, s2: 2 * n}))
        self.assertEqual(self.check_consistency(owner, eid, [m], [s1, s2]), [])
        self.assertEqual(check_invariants(r), [])
        reached = [e for e in self.all_events(owner, eid) if e['type'] == 'level.reached']
        self.assertEqual(len(reached), 1)
        replayed = [k for k, v in outcomes.items() if v[-1] == 200]
        sys.stderr.write('%d awards, %d retried after 503/504, %d of them found applied\n' %
                         (n, len(timed_out), len(replayed)))

    def test_award_reply_delayed_by_proxy(self):
        """The RESP proxy holds the award script's reply past REDIS_TIMEOUT_MS; retries with the
        key then find it applied exactly once."""
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), 'adversary'))
        from harness import FaultProxy
        self.pool = harness.Wallet.random(4)
        r = self.redis()
        p = FaultProxy(r.port).start()
        self.addCleanup(p.stop)
        svc = self.entityd(redis=r, env={'REDIS_TIMEOUT_MS': '300',
                                         'REDIS_URL': 'redis://127.0.0.1:%d/0' % p.port})
        self.api = Api(svc.port)
        eid, c, (s1,) = self.setup_entity(members=1, skills=1)
        owner, m = c['owner'], c['member'].address
        body = self.contrib(m, [s1], [5], title='slow', idempotencyKey='proxy-1')
        self.api.auth(owner)
        p.delay(1500, match=rb'(?i)evalsha')
        st, _, first = self.api.award(owner, eid, body)
        p.release()
        self.assertIn(st, (503, 504), first)
        st, _, again = self.call(lambda: self.api.award(owner, eid, body), 'retry')
        # the script ran (only its reply was held): the retry finds it
        self.assertEqual((st, again.get('replayed')), (200, True), again)
        st, _, third = self.call(lambda: self.api.award(owner, eid, body), 'third')
        self.assertEqual((st, third.get('replayed'), third.get('data')),
                         (200, True, again['data']))
        # cut the link at the award's EVALSHA: applied once or not at all, never twice
        body2 = self.contrib(m, [s1], [7], title='cut', idempotencyKey='proxy-2')
        p.cut(match=rb'(?i)evalsha')
        st, _, first = self.api.award(owner, eid, body2)
        p.release()
        self.assertIn(st, (503, 504), first)
        st, _, again = self.call(lambda: self.api.award(owner, eid, body2), 'retry cut')
        self.assertIn(st, (200, 201), again)
        cs = self.all_contributions(owner, eid, m)
        self.assertEqual(sorted(x['title'] for x in cs), ['cut', 'slow'])
        self.assertEqual(self.prog(owner, eid, m)['xp'], 12)
        self.assertEqual(self.check_consistency(owner, eid, [m], [s1]), [])
        self.assertEqual(check_invariants(r), [])


class RoundTripTest(ProgressionBase):
    """Progress and a leaderboard page are one round trip to Redis each: with every Redis reply
    held 300 ms by the RESP proxy, a read takes one delay, not two. The read cache is off here:
    an answer from it takes none (CacheTest)."""

    def test_progress_one_round_trip(self):
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
        eid, c, (s1, s2) = self.setup_entity(members=1, skills=2)
        owner, m = c['owner'], c['member'].address
        self.assertOk(self.put_level(owner, eid, 'L', [s1], [1], 1), 201)
        self.award_ok(owner, eid, self.contrib(m, [s1, s2], [1, 2]))
        for w in (owner, c['member']):
            self.prog(w, eid, m)  # signatures verified and cached before the delay
        base = []
        for _ in range(3):
            t0 = time.monotonic()
            self.prog(owner, eid, m)
            base.append(time.monotonic() - t0)
        self.assertOk(self.api.leaderboard(owner, eid))
        # One round trip takes `delay`, two take twice it: the bounds below tell them apart
        # with `delay` to spare for a loaded machine.
        delay = 1.0
        p.delay(int(delay * 1000))
        try:
            reads = [(lambda w=w: self.prog(w, eid, m)['xp'], 3) for w in (owner, c['member'])]
            reads.append((lambda: self.assertOk(self.api.leaderboard(owner, eid))['data'][0]['value'],
                          3))
            reads.append((lambda: self.assertOk(self.api.leaderboard(owner, eid, by=s2))['data'][0][
                'value'], 2))
            for read, want in reads:
                t0 = time.monotonic()
                got = read()
                took = time.monotonic() - t0
                self.assertEqual(got, want)
                self.assertGreaterEqual(took, delay * 0.9, 'the delay did not apply')
                # the data itself comes from one read (the sign-in step's revocation check aside)
                self.assertLess(took, 3 * delay + min(base) * 2,
                                'progress took %.3fs: more than two round trips' % took)
                # CONTRACT section 5: the whole request is one round trip
                self.assertLess(took, 2 * delay + min(base) * 2,
                                'progress took %.3fs with replies held %.1fs: more than one '
                                'round trip (base %.3fs)' % (took, delay, min(base)))
        finally:
            p.release()


read_cache_metrics = harness.read_cache_metrics


class CacheTest(ProgressionBase):
    """Progress and leaderboard pages go through the read cache. Two instances, A and B, on one
    Redis: a repeated read is answered from memory (Redis runs nothing), and every change is
    seen: at once on the instance that made it (award, revocation, level update), on the other
    once Redis's invalidation message arrives."""

    def setUp(self):
        super().setUp()
        self.pool = harness.Wallet.random(8)
        self.r = self.redis()
        self.a = self.entityd(redis=self.r)
        self.b = self.entityd(redis=self.r)
        for svc in (self.a, self.b):
            harness.wait_for(lambda: read_cache_metrics(svc.port).get(
                'entityd_read_cache_enabled') == 1, scaled(10), what='read cache on')
        self.api = Api(self.a.port)
        self.api_b = Api(self.b.port)

    def commands(self):
        info = self.r.cli('INFO', 'stats', timeout=scaled(10))
        info = info.decode() if isinstance(info, bytes) else info
        return int(re.search(r'total_commands_processed:(\d+)', info).group(1))

    def eventually(self, fn, check, what):
        out = {}

        def ok():
            out['v'] = fn()
            return check(out['v'])
        harness.wait_for(ok, scaled(2), what=what)
        return out['v']

    def test_cached_reads_follow_every_change(self):
        eid, c, (s1, s2) = self.setup_entity(members=2, skills=2)
        owner, reader = c['owner'], c['outsider']
        m, m2 = c['member'].address, c['member2'].address
        self.assertOk(self.put_level(owner, eid, 'L1', [s1], [5], 5), 201)
        self.award_ok(owner, eid, self.contrib(m, [s1], [3]))
        self.award_ok(owner, eid, self.contrib(m2, [s2], [4]))
        reads = {
            'progress': lambda api: self.assertOk(api.progress(reader, eid, m))['data'],
            'board': lambda api: self.assertOk(api.leaderboard(reader, eid))['data'],
            'skill board': lambda api: self.assertOk(api.leaderboard(reader, eid, s1))['data'],
        }
        for api in (self.api, self.api_b):
            for read in reads.values():
                read(api)
        # Repeated reads: from memory, Redis runs nothing.
        hits = read_cache_metrics(self.a.port)['entityd_read_cache_total{outcome="hit"}']
        before = self.commands()
        for read in reads.values():
            read(self.api)
        self.assertEqual(self.commands() - before, 1)  # INFO itself
        self.assertGreater(read_cache_metrics(self.a.port)[
            'entityd_read_cache_total{outcome="hit"}'], hits)
        # An award through A: A's very next reads show it.
        self.award_ok(owner, eid, self.contrib(m, [s1], [2]))
        p = reads['progress'](self.api)
        self.assertEqual((p['xp'], p['rank'], self.level_of(p, 'L1')['reached']), (5, 1, True))
        self.assertEqual([(e['member'], e['value']) for e in reads['board'](self.api)],
                         [(m, 5), (m2, 4)])
        self.assertEqual([(e['member'], e['value']) for e in reads['skill board'](self.api)],
                         [(m, 5)])
        # B hears of it from Redis.
        self.eventually(lambda: reads['progress'](self.api_b), lambda p: p['xp'] == 5,
                        'B seeing the award')
        self.eventually(lambda: reads['board'](self.api_b), lambda b: b[0]['value'] == 5,
                        'B seeing the board move')
        # A revocation through B: B at once, A after the message.
        cid = self.all_contributions(owner, eid, m, api=self.api_b)[0]['id']
        self.assertOk(self.api_b.revoke(owner, eid, cid, {'reason': 'undo'}))
        p = reads['progress'](self.api_b)
        self.assertEqual((p['xp'], p['rank'], self.level_of(p, 'L1')['reached']), (3, 2, False))
        self.assertEqual(reads['skill board'](self.api_b), [
            {'rank': 1, 'member': m, 'value': 3}])
        self.eventually(lambda: reads['progress'](self.api), lambda p: p['xp'] == 3,
                        'A seeing the revocation')
        # A threshold lowered through A: reached flips on both, the skill tree's change alone.
        self.assertOk(self.put_level(owner, eid, 'L1', [s1], [3], 3))
        self.assertTrue(self.level_of(reads['progress'](self.api), 'L1')['reached'])
        self.eventually(lambda: self.level_of(reads['progress'](self.api_b), 'L1')['reached'],
                        lambda v: v is True, 'B seeing the lowered threshold')
        # The entity made private: the outsider is refused on both, from the next read on A.
        self.assertOk(self.update_entity(owner, eid, public=False))
        self.assertEqual(self.api.progress(reader, eid, m)[0], 403)
        self.assertEqual(self.api.leaderboard(reader, eid)[0], 403)
        self.eventually(lambda: self.api_b.leaderboard(reader, eid)[0], lambda st: st == 403,
                        'B refusing the outsider')
        self.assertEqual(check_invariants(self.r), [])

    def test_cached_answers_are_the_direct_reads(self):
        """Each cached read is kept under its caller, member, board, limit and cursor: read
        twice through A (the second from memory), every answer is the one an instance without
        the read cache gives, also where callers of different roles read the same thing in a
        private entity."""
        eid, c, (s1, s2) = self.setup_entity(public=False, members=4, skills=2)
        owner, admin, outsider = c['owner'], c['admin'], c['outsider']
        mems = [c['member'], c['member2'], c['member3'], c['member4']]
        for i, w in enumerate(mems):
            self.award_ok(owner, eid, self.contrib(w.address, [s1, s2], [i % 2 + 1, 4 - i]))
        direct = Api(self.entityd(redis=self.r, env={'READ_CACHE_MB': '0'}).port)
        first = self.assertOk(direct.leaderboard(owner, eid, 'xp', '&limit=1'))
        cursor = '&limit=1&cursor=' + first['nextCursor']
        second = self.assertOk(direct.leaderboard(owner, eid, 'xp', cursor))
        deeper = '&limit=2&cursor=' + second['nextCursor']
        reads = []
        for who in (owner, admin, mems[0], mems[1], outsider):
            for m in (mems[0], mems[1], outsider):
                reads.append(lambda api, who=who, m=m: api.progress(who, eid, m.address))
            for by in ('xp', s1, s2):
                for extra in ('', '&limit=1', '&limit=2', cursor, deeper):
                    reads.append(lambda api, who=who, by=by, extra=extra:
                                 api.leaderboard(who, eid, by, extra))
        hits = read_cache_metrics(self.a.port)['entityd_read_cache_total{outcome="hit"}']
        for turn in range(2):
            for read in reads:
                want, got = read(direct), read(self.api)
                self.assertEqual((got[0], got[2]), (want[0], want[2]), turn)
        self.assertGreater(read_cache_metrics(self.a.port)[
            'entityd_read_cache_total{outcome="hit"}'], hits + len(reads) // 2)
        # Every status came up: 200, 403 for the outsider, 404 for a non-member's progress.
        self.assertEqual({read(direct)[0] for read in reads}, {200, 403, 404})

    def test_kept_progress_follows_the_clock(self):
        """A level met by the current rule but never recorded (its threshold lowered after the
        awards) is reached until its endsAt, then not: a progress answer kept in the cache
        turns over at that moment, with nothing written."""
        eid, c, (s1, _) = self.setup_entity(members=1, skills=2)
        owner, m = c['owner'], c['member'].address
        self.assertOk(self.put_level(owner, eid, 'L', [s1], [9], 9), 201)
        self.award_ok(owner, eid, self.contrib(m, [s1], [3]))
        # endsAt far enough ahead that the reads below come before it on a loaded machine
        ends = int(time.time() * 1000) + int(scaled(5) * 1000)
        self.assertOk(self.put_level(owner, eid, 'L', [s1], [2], 2, ends_at=harness.iso_ms(ends)))
        rendered = 'entityd_read_cache_rendered_total'
        before = read_cache_metrics(self.a.port)[rendered]
        for _ in range(3):
            lv = self.level_of(self.prog(owner, eid, m), 'L')
            self.assertEqual((lv['reached'], lv['reachedAt']), (True, None))
        self.assertGreater(read_cache_metrics(self.a.port)[rendered], before)
        time.sleep(max(0, ends / 1000 - time.time()) + 0.05)
        lv = self.level_of(self.prog(owner, eid, m), 'L')
        self.assertEqual((lv['reached'], lv['reachedAt']), (False, None))


class ScriptFlushTest(ProgressionBase):
    """Redis forgets its scripts (SCRIPT FLUSH, as after a failover to a fresh replica): a
    progress read, whose script runs inside a transaction where it cannot be resent with its
    source, answers 503 with Retry-After at most once, then the service has loaded its scripts
    again. An award (a script on its own) is resent with its source, applied once, and has
    every script loaded again: the reads after it find theirs."""

    def test_progress_and_award_after_script_flush(self):
        self.pool = harness.Wallet.random(8)
        r = self.redis()
        svc = self.entityd(redis=r, env={'READ_CACHE_MB': '0'})
        self.api = Api(svc.port)
        eid, c, (s1, _) = self.setup_entity(members=2, skills=2)
        owner, m, m2 = c['owner'], c['member'].address, c['member2'].address
        self.award_ok(owner, eid, self.contrib(m, [s1], [2]))
        self.assertEqual(self.prog(owner, eid, m)['xp'], 2)
        self.assertEqual(r.cli('SCRIPT', 'FLUSH'), 'OK')
        st, headers, body = self.api.progress(owner, eid, m)
        if st != 200:
            self.assertEnvelope((st, headers, body), 503, 'unavailable')
            self.assertEqual(headers.get('retry-after'), '1')
        harness.wait_for(lambda: self.api.progress(owner, eid, m)[0] == 200, scaled(5),
                         what='progress after the scripts were loaded again')
        self.assertEqual(r.cli('SCRIPT', 'FLUSH'), 'OK')
        self.award_ok(owner, eid, self.contrib(m2, [s1], [3]))
        self.assertEqual(self.prog(owner, eid, m2)['xp'], 3)
        self.assertEqual(self.prog(owner, eid, m)['rank'], 2)
        self.assertEqual(check_invariants(r), [])


if __name__ == '__main__':
    harness.main()
