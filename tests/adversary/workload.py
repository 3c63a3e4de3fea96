"""A small data set and the well-behaved requests on it, shared by the adversary tests and
scripts/chaos: entities with aliases, admins, skills, levels and members earning progress, read
and written through the API by Checker threads whose every answer is checked.

    world = World(port, wallets)          # creates the data set through the API
    cases = world.cases(worker, versions, writes=True)
    Checker(port, cases, seconds).start()
    check_invariants(redis, versions, acks=world.acks)

Write cases accept the answers a correct service gives under concurrency (409 for an alias
another entity holds); reads check the answer is the right entity, skills or members page.

Progression (CONTRACT section 5): awards, one or a batch of two, each with an idempotency key
whose contributions are titled "idem <key>" ("idem <key> #<i>" in a batch: the invariant checker
finds a key applied twice by its titles); an award answered 503/504 is sent again with the same
key and body until it is answered, when a 200 must say "replayed". Revocations of the worker's
own contributions (retried the same way; revoking a revoked one answers 200 with the record).
Progress reads, leaderboard pages (following nextCursor), contributions pages and event reads
(walking the stream with after) are checked for what one consistent snapshot must show.
Members churn (CONTRACT section 8): each writing worker has one member of its own per entity
that it adds, awards once, removes and adds again, over and over (removals of one loop turn go
as one script call: redis/group.h); every answer is checked (a removal or add retried after an
unknown outcome finds its work done: missing or existing), and boards may list those members.
World.acks records every acknowledged award and revocation."""

import json
import os
import random
import re
import sys
import threading
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'integration'))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from clients import Case, error_envelope, ok_json, random_entity_id  # noqa: E402

ENTITIES = 3
ALIAS_POOL = ['guild-%d' % k for k in range(5)]  # fewer than entities x 2: claims collide
EARNERS = 3  # members per entity, besides the member wallet, that awards go to
EVENT_TYPES = {'contribution.added', 'contribution.revoked', 'level.reached', 'member.added',
               'entity.updated', 'skill.added', 'level.updated', 'admin.added', 'admin.removed',
               'member.removed'}
EVENT_ID = re.compile(r'^(\d+)-(\d+)$')
ISO_MS = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$')


def _json(resp):
    try:
        return json.loads(resp.body.decode('utf-8'))
    except ValueError:
        return None


def _event_key(eid):
    m = EVENT_ID.match(eid or '')
    return (int(m.group(1)), int(m.group(2))) if m else None


class Acks:
    """Acknowledged progression writes: {entity id: {contribution id: member}} awarded and
    {entity id: set of contribution ids} revoked, as answers showed them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.awarded = {}
        self.revoked = {}

    def award(self, eid, contributions):
        with self.lock:
            d = self.awarded.setdefault(eid, {})
            for c in contributions:
                d[c['id']] = c['member']

    def revoke(self, eid, cid):
        with self.lock:
            self.revoked.setdefault(eid, set()).add(cid)

    def snapshot(self):
        with self.lock:
            return ({k: dict(v) for k, v in self.awarded.items()},
                    {k: set(v) for k, v in self.revoked.items()})


class World:
    def __init__(self, port, wallets=None, entities=ENTITIES):
        self.port = port
        self.owner, self.admin, self.member = wallets or harness.Wallet.random(3)
        msg, _ = harness.current_message(port)
        self.auth = {}
        for w in (self.owner, self.admin, self.member):
            a, s = w.sign(msg)
            self.auth[w.address] = 'address=%s&signature=%s' % (a, s)
        self.owner_auth = self.auth[self.owner.address]
        self.admin_auth = self.auth[self.admin.address]
        self.member_auth = self.auth[self.member.address]
        self.eids = []
        self.names = {}
        self.skills = {}
        self.earners = {}
        for k in range(entities):
            name = 'Adversary Guild %d' % k
            st, _, b = harness.request(port, 'POST', '/api/entities?' + self.owner_auth,
                                       body=self.entity_body(name, alias=ALIAS_POOL[k]))
            assert st == 201, (st, b)
            eid = b['data']['id']
            self.eids.append(eid)
            self.names[eid] = name
            st, _, b = harness.request(port, 'POST', '/api/entities/%s/admins?%s' % (
                eid, self.owner_auth), body={'addresses': [self.admin.address]})
            assert st == 200, (st, b)
            st, _, b = harness.request(port, 'POST', '/api/skills/multiple?' + self.owner_auth,
                                       body={'names': ['base-a', 'base-b'], 'entityID': eid})
            assert st == 201, (st, b)
            self.skills[eid] = [s['id'] for s in b['data']]
            st, _, b = harness.request(port, 'POST', '/api/entities/%s/force-add?%s' % (
                eid, self.owner_auth), body={'addresses': [self.member.address], 'Chain': 'eth'})
            assert st == 200, (st, b)
            earners = ['0x' + os.urandom(20).hex() for _ in range(EARNERS)]
            st, _, b = harness.request(port, 'POST', '/api/entities/%s/force-add?%s' % (
                eid, self.owner_auth), body={'addresses': earners, 'Chain': 'eth'})
            assert st == 200, (st, b)
            self.earners[eid] = [self.member.address.lower()] + earners
        self.acks = Acks()
        self.churners = {eid: set() for eid in self.eids}  # on the boards now and then

    def entity_body(self, name, alias=None, eid=None):
        b = {'name': name, 'description': 'd', 'ownerAddresses': [self.owner.address],
             'twitter': '', 'discord': '', 'website': '', 'imageUrl': ''}
        if alias is not None:
            b['communityURLAlias'] = alias
        if eid:
            b['id'] = eid
        return b

    def cases(self, worker, versions=None, writes=True, seed=None):
        """The request cycle of one well-behaved client (worker: a number, keeps its names
        apart from the others')."""
        rng = random.Random(seed if seed is not None else worker)
        port_eids = self.eids
        counter = [0]

        def nxt():
            counter[0] += 1
            return counter[0]

        def pick():
            return port_eids[rng.randrange(len(port_eids))]

        def record_entity(resp, sent, received):
            b = _json(resp)
            if versions is not None and b and isinstance(b.get('data'), dict):
                versions.record(b['data'].get('id'), sent, received, b['data'].get('__v'))

        def expect_entity(eid_box):
            def check(resp):
                err = ok_json(200)(resp)
                if err:
                    return err
                d = _json(resp)['data']
                if d.get('id') != eid_box[0]:
                    return 'entity %s answered for %s' % (d.get('id'), eid_box[0])
                if self.owner.address not in d.get('ownerAddress', []):
                    return 'owner missing from %r' % d.get('ownerAddress')
                if not str(d.get('name', '')).startswith('Adversary Guild'):
                    return 'name %r' % d.get('name')
                return None
            return check

        cases = [Case('healthz', 'GET', '/healthz', needs_redis=False,
                      expect=lambda r: None if (r.status == 200 and _json(r) ==
                                                {'success': True, 'status': 'ok'})
                      else 'healthz %d %r' % (r.status, r.body[:100]))]

        get_box = [None]

        def make_get():
            get_box[0] = pick()
            return 'GET', '/api/entities/%s?address=%s' % (get_box[0], self.member.address), \
                None, None
        cases.append(Case('get-entity', make=make_get, expect=expect_entity(get_box),
                          after=record_entity))

        sk_box = [None]

        def make_skills():
            sk_box[0] = pick()
            return 'GET', '/api/skills?entityID=%s&%s' % (sk_box[0], self.member_auth), None, \
                None

        def expect_skills(resp):
            err = ok_json(200)(resp)
            if err:
                return err
            d = _json(resp)['data']
            if d.get('entityID') != sk_box[0]:
                return 'skills of %s answered for %s' % (d.get('entityID'), sk_box[0])
            ids = [s.get('id') for s in d.get('skills', [])]
            if not set(self.skills[sk_box[0]]) <= set(ids):
                return 'base skills missing: %r' % ids[:5]
            if any(s.get('entityID') != sk_box[0] for s in d.get('skills', [])):
                return 'a skill of another entity'
            return None
        cases.append(Case('get-skills', make=make_skills, expect=expect_skills))

        us_box = [None]

        def make_users():
            us_box[0] = pick()
            return 'GET', '/api/entities/%s/users?limit=5&%s' % (us_box[0], self.member_auth), \
                None, None

        def expect_users(resp):
            err = ok_json(200)(resp)
            if err:
                return err
            users = _json(resp).get('users')
            if not isinstance(users, list) or not users or len(users) > 5:
                return 'users %r' % (users,)
            return None
        cases.append(Case('get-users', make=make_users, expect=expect_users))

        def expect_not_found(resp):
            if resp.status != 404:
                return 'unknown entity: %d %r' % (resp.status, resp.body[:100])
            return error_envelope(resp, 'not_found')
        cases.append(Case('get-unknown', make=lambda: (
            'GET', '/api/entities/%s?address=%s' % (random_entity_id(), self.member.address),
            None, None), expect=expect_not_found))

        cases.extend(self.progress_reads(rng))
        if not writes:
            return cases

        up_box = [None]

        def make_update():
            eid = up_box[0] = pick()
            alias = ALIAS_POOL[rng.randrange(len(ALIAS_POOL))]
            body = self.entity_body(self.names[eid] + ' w%d' % worker, alias=alias, eid=eid)
            return 'POST', '/api/entities?' + self.owner_auth, body, None

        def expect_update(resp):
            if resp.status == 409:
                return error_envelope(resp, 'conflict')
            return expect_entity(up_box)(resp)

        def record_update(resp, sent, received):
            if resp.status == 200:
                record_entity(resp, sent, received)
        cases.append(Case('update-entity', make=make_update, expect=expect_update,
                          after=record_update))

        def make_force_add():
            eid = pick()
            addrs = ['0x%08x%08x%024x' % (worker, nxt(), rng.randrange(1 << 60))
                     for _ in range(rng.randrange(1, 4))]
            return 'POST', '/api/entities/%s/force-add?%s' % (eid, self.admin_auth), \
                {'addresses': addrs, 'Chain': 'eth'}, None

        def expect_force_add(resp):
            err = ok_json(200)(resp)
            if err:
                return err
            b = _json(resp)
            if not isinstance(b.get('added'), int) or not isinstance(b.get('existing'), int):
                return 'force-add %r' % b
            return None
        cases.append(Case('force-add', make=make_force_add, expect=expect_force_add))

        sk_post = [None]

        def make_skill():
            eid = sk_post[0] = pick()
            return 'POST', '/api/skills?' + self.admin_auth, \
                {'name': 'sk-%d-%d' % (worker, rng.randrange(20)),  # a bounded set: 409s
                 'description': 'x', 'entityID': eid}, None

        def expect_skill(resp):
            if resp.status == 409:
                return error_envelope(resp, 'conflict')
            err = ok_json(201)(resp)
            if err:
                return err
            d = _json(resp)['data']
            if d.get('entityID') != sk_post[0]:
                return 'skill made in %s for %s' % (d.get('entityID'), sk_post[0])
            return None
        cases.append(Case('add-skill', make=make_skill, expect=expect_skill))

        def make_level():
            eid = pick()
            ids = self.skills[eid]
            return 'POST', '/api/entities/%s/levels/lv-%d-%d/update?%s' % (
                eid, worker, rng.randrange(4), self.owner_auth), \
                {'name': 'L', 'description': '', 'skillIds': ids, 'scores': [1] * len(ids),
                 'XP': rng.randrange(1000), 'endsAt': ''}, None

        def expect_level(resp):
            if resp.status not in (200, 201):
                return 'level %d %r' % (resp.status, resp.body[:200])
            return ok_json(resp.status)(resp)
        cases.append(Case('level', make=make_level, expect=expect_level))

        def make_admins():
            eid = pick()
            return 'POST', '/api/entities/%s/admins?%s' % (eid, self.owner_auth), \
                {'addresses': [self.admin.address]}, None

        def expect_admins(resp):
            err = ok_json(200)(resp)
            if err:
                return err
            if self.admin.address not in (_json(resp).get('admins') or []):
                return 'admins %r' % _json(resp).get('admins')
            return None
        cases.append(Case('admins', make=make_admins, expect=expect_admins))
        cases.extend(self.progress_writes(worker, rng))
        cases.append(self.churn(worker, rng))
        rng.shuffle(cases)
        return cases

    # ---- member progression -----------------------------------------------------------------

    def progress_reads(self, rng):
        """Progress, leaderboard, contributions and events reads, each checked for what one
        consistent snapshot shows."""
        eids = self.eids
        cases = []

        pr_box = [None, None]

        def make_progress():
            eid = pr_box[0] = eids[rng.randrange(len(eids))]
            m = pr_box[1] = rng.choice(self.earners[eid])
            return 'GET', '/api/entities/%s/members/%s/progress?%s' % (eid, m, self.member_auth), \
                None, None

        def expect_progress(resp):
            err = ok_json(200)(resp)
            if err:
                return err
            d = _json(resp)['data']
            xp = d.get('xp')
            if d.get('member') != pr_box[1] or not isinstance(xp, int) or xp < 0:
                return 'progress of %s: member %r xp %r' % (pr_box[1], d.get('member'), xp)
            rank = d.get('rank')
            if (rank is None) != (xp == 0) or (rank is not None and
                                               (not isinstance(rank, int) or rank < 1)):
                return 'rank %r at xp %d' % (rank, xp)
            scores = {}
            for s in d.get('skills') or []:
                if not isinstance(s.get('score'), int) or s['score'] <= 0 or \
                        not str(s.get('skillId', '')).startswith('s-'):
                    return 'skill entry %r' % s
                scores[s['skillId']] = s['score']
            if not set(scores) <= set(self.skills[pr_box[0]]):
                return 'scores in skills never awarded: %r' % sorted(scores)
            levels = d.get('levels') or []
            if [(lv.get('XP'), lv.get('id')) for lv in levels] != \
                    sorted((lv.get('XP'), lv.get('id')) for lv in levels):
                return 'levels not by XP, then id'
            top = None
            for lv in levels:
                miss = lv.get('missing') or {}
                if miss.get('xp') != max(0, lv['XP'] - xp):
                    return 'level %s missing xp %r at xp %d' % (lv['id'], miss.get('xp'), xp)
                for ms in miss.get('skills') or []:
                    have = scores.get(ms.get('skillId'), 0)
                    if ms.get('have') != have or not have < ms.get('need', 0):
                        return 'level %s missing %r, score %d' % (lv['id'], ms, have)
                # The data set's levels never end: reached is the thresholds met.
                met = miss.get('xp') == 0 and not miss.get('skills')
                if lv.get('reached') is not met:
                    return 'level %s reached %r, missing %r' % (lv['id'], lv.get('reached'),
                                                                miss)
                if met and lv.get('reachedAt') is not None and \
                        not ISO_MS.match(str(lv['reachedAt'])):
                    return 'level %s reachedAt %r' % (lv['id'], lv['reachedAt'])
                if met and (top is None or lv['XP'] >= top['XP']):
                    top = lv
            if (d.get('level') is None) != (top is None) or \
                    (top is not None and not any(lv['id'] == d['level'] and lv['reached'] and
                                                 lv['XP'] == top['XP'] for lv in levels)):
                return 'level %r, the highest reached is %r' % (d.get('level'),
                                                                top and top['id'])
            return None
        cases.append(Case('progress', make=make_progress, expect=expect_progress))

        lb_box = [None, None, None, None]  # entity, by, limit, cursor sent
        lb_next = {}

        def make_board():
            eid = eids[rng.randrange(len(eids))]
            by = rng.choice(['xp'] + self.skills[eid])
            limit = rng.randrange(1, 6)
            cursor = lb_next.get((eid, by)) if rng.random() < 0.7 else None
            lb_box[:] = [eid, by, limit, cursor]
            return 'GET', '/api/entities/%s/leaderboard?by=%s&limit=%d%s&%s' % (
                eid, by, limit, '&cursor=' + cursor if cursor else '', self.member_auth), \
                None, None

        def expect_board(resp):
            err = ok_json(200)(resp)
            if err:
                return err
            eid, by, limit, cursor = lb_box
            b = _json(resp)
            page = b.get('data')
            if not isinstance(page, list) or len(page) > limit:
                return 'leaderboard page %r' % (page,)
            start = 0  # where the group of equal values the entry is in begins on the page
            for i, e in enumerate(page):
                if e.get('member') not in self.earners[eid] and \
                        e.get('member') not in self.churners[eid]:
                    return 'leaderboard %s: member %r was never awarded' % (by, e.get('member'))
                if not isinstance(e.get('value'), int) or e['value'] <= 0 or \
                        not isinstance(e.get('rank'), int) or e['rank'] < 1:
                    return 'leaderboard %s: entry %r' % (by, e)
                if i == 0:
                    if cursor is None and e['rank'] != 1:
                        return 'leaderboard %s: first page starts at rank %d' % (by, e['rank'])
                    continue
                p = page[i - 1]
                if e['value'] > p['value'] or (e['value'] == p['value'] and
                                               e['member'] <= p['member']):
                    return 'leaderboard %s: %r after %r' % (by, e, p)
                if e['value'] == p['value']:
                    if e['rank'] != p['rank']:
                        return 'leaderboard %s: a tie ranked %d and %d' % (by, p['rank'],
                                                                          e['rank'])
                    continue
                # Competition rank: 1 + how many have more. The group that ended began at
                # `start`; had it begun on an earlier page, the rank only rises further.
                want = page[start]['rank'] + (i - start)
                if (e['rank'] != want) if (start > 0 or cursor is None) else (e['rank'] < want):
                    return 'leaderboard %s: rank %d after %r, want %d' % (by, e['rank'], p,
                                                                         want)
                start = i
            nxt = b.get('nextCursor')
            if nxt is not None and (not isinstance(nxt, str) or len(page) < limit):
                return 'leaderboard %s: nextCursor %r after %d of %d' % (by, nxt, len(page),
                                                                          limit)
            lb_next[(eid, by)] = nxt
            return None
        cases.append(Case('leaderboard', make=make_board, expect=expect_board))

        cl_box = [None, None]

        def make_contribs():
            eid = cl_box[0] = eids[rng.randrange(len(eids))]
            m = cl_box[1] = rng.choice(self.earners[eid])
            return 'GET', '/api/entities/%s/members/%s/contributions?limit=5&%s' % (
                eid, m, self.admin_auth), None, None

        def expect_contribs(resp):
            err = ok_json(200)(resp)
            if err:
                return err
            page = _json(resp).get('data')
            if not isinstance(page, list) or len(page) > 5:
                return 'contributions page %r' % (page,)
            for i, c in enumerate(page):
                if c.get('member') != cl_box[1] or c.get('entityID') != cl_box[0] or \
                        not isinstance(c.get('revoked'), bool) or \
                        (c['revoked'] != (c.get('revokedAt') is not None)):
                    return 'contribution of %s: %r' % (cl_box[1], c)
                if i and c.get('createdAt', '') > page[i - 1].get('createdAt', ''):
                    return 'contributions not newest first'
            return None
        cases.append(Case('contributions', make=make_contribs, expect=expect_contribs))

        ev_box = [None, None, None]  # entity, after sent, limit
        ev_after = {}

        def make_events():
            eid = eids[rng.randrange(len(eids))]
            after = ev_after.get(eid)
            limit = rng.choice((10, 50))
            ev_box[:] = [eid, after, limit]
            return 'GET', '/api/entities/%s/events?limit=%d%s&%s' % (
                eid, limit, '&after=' + after if after else '', self.admin_auth), None, None

        def expect_events(resp):
            err = ok_json(200)(resp)
            if err:
                return err
            eid, after, limit = ev_box
            b = _json(resp)
            page = b.get('data')
            if not isinstance(page, list) or len(page) > limit:
                return 'events page %r' % (page,)
            prev = _event_key(after) if after else (0, -1)
            for e in page:
                k = _event_key(e.get('id'))
                if k is None or k <= prev:
                    return 'event %r after %r' % (e.get('id'), after)
                prev = k
                if e.get('type') not in EVENT_TYPES or not ISO_MS.match(str(e.get('at'))) or \
                        not isinstance(e.get('data'), dict):
                    return 'event %r' % (e,)
                if e['type'].startswith('contribution.') and (
                        (e['data'].get('member') not in self.earners[eid] and
                         e['data'].get('member') not in self.churners[eid]) or
                        not str(e['data'].get('id', '')).startswith('k-')):
                    return 'event %r' % (e,)
            nxt = b.get('nextCursor')
            if nxt is not None and (len(page) != limit or nxt != page[-1]['id']):
                return 'events nextCursor %r after %d of %d' % (nxt, len(page), limit)
            if page:
                ev_after[eid] = page[-1]['id']
            return None
        cases.append(Case('events', make=make_events, expect=expect_events))
        return cases

    def progress_writes(self, worker, rng):
        """Awards with idempotency keys and revocations of this worker's own contributions,
        each sent again unchanged after a 503/504 until it is answered."""
        eids = self.eids
        token = uuid.uuid4().hex[:6]
        admin = self.admin.address.lower()
        counter = [0]
        mine = []          # (entity, contribution id, member): this worker's, not yet revoked
        award = {}         # the award in flight: eid, path, body, want, tries
        revoke = {}        # the revocation in flight: eid, cid, member, path, body, tries

        def make_award():
            if not award:
                eid = eids[rng.randrange(len(eids))]
                counter[0] += 1
                key = 'w%d-%s-%d' % (worker, token, counter[0])
                items = []
                for i in range(2 if counter[0] % 4 == 0 else 1):
                    sids = rng.sample(self.skills[eid], rng.randrange(0, 3))
                    c = {'member': rng.choice(self.earners[eid]),
                         'skills': [{'skillId': sid, 'score': rng.randrange(1, 6)}
                                    for sid in sids],
                         'title': 'idem %s' % key}
                    if not sids or rng.random() < 0.3:
                        c['xp'] = rng.randrange(0 if sids else 1, 20)
                    items.append(c)
                if len(items) == 1:
                    body = dict(items[0], idempotencyKey=key)
                else:
                    for i, c in enumerate(items):
                        c['title'] += ' #%d' % i
                    body = {'contributions': items, 'idempotencyKey': key}
                want = [(c['member'], c.get('xp', sum(s['score'] for s in c['skills'])),
                         c['skills'], c['title']) for c in items]
                award.update(eid=eid, body=body, want=want, batch=len(items) > 1, tries=0,
                             path='/api/entities/%s/contributions?%s' % (eid, self.admin_auth))
            award['tries'] += 1
            return 'POST', award['path'], award['body'], None

        def expect_award(resp):
            b = _json(resp) or {}
            if resp.status == 200 and award['tries'] > 1:
                if b.get('replayed') is not True:
                    return 'a retried award answered 200 without replayed: %r' % resp.body[:200]
                err = ok_json(200)(resp)
            else:
                err = ok_json(201)(resp)
                if not err and 'replayed' in b:
                    return 'a first award answered with replayed: %r' % resp.body[:200]
            if err:
                if resp.status not in (503, 504):  # a wrong answer: not sent again
                    award.clear()
                return err
            data = b.get('data')
            got = data if award['batch'] else [data]
            if not isinstance(got, list) or len(got) != len(award['want']):
                award.clear()
                return 'award answered %r' % resp.body[:200]
            for c, (m, xp, skills, title) in zip(got, award['want']):
                if not isinstance(c, dict) or (c.get('member'), c.get('xp'), c.get('skills'),
                                               c.get('title'), c.get('entityID'),
                                               c.get('createdBy'), c.get('revoked')) != \
                        (m, xp, skills, title, award['eid'], admin, False) or \
                        not str(c.get('id', '')).startswith('k-'):
                    award.clear()
                    return 'award of %r answered %r' % ((m, xp, title), c)
            self.acks.award(award['eid'], got)
            for c in got:
                mine.append((award['eid'], c['id'], c['member']))
            award.clear()
            return None
        # Awards come twice a cycle, revocations once: about a third are revoked.
        cases = [Case('award', make=make_award, expect=expect_award),
                 Case('award', make=make_award, expect=expect_award)]

        def make_revoke():
            if not revoke:
                if mine:
                    eid, cid, m = mine.pop(rng.randrange(len(mine)))
                else:  # nothing of ours yet: an unknown contribution
                    eid, cid, m = eids[0], 'k-' + str(uuid.uuid4()), None
                revoke.update(eid=eid, cid=cid, member=m, tries=0,
                              path='/api/entities/%s/contributions/%s/revoke?%s' % (
                                  eid, cid, self.admin_auth),
                              body={'reason': 'checked by worker %d' % worker})
            revoke['tries'] += 1
            return 'POST', revoke['path'], revoke['body'], None

        def expect_revoke(resp):
            if revoke['member'] is None:
                err = 'unknown contribution: %d' % resp.status if resp.status != 404 else \
                    error_envelope(resp, 'not_found')
            else:
                err = ok_json(200)(resp)
                c = (_json(resp) or {}).get('data') or {}
                if not err and ((c.get('id'), c.get('member'), c.get('revoked'),
                                 c.get('revokedBy'), c.get('reason')) !=
                                (revoke['cid'], revoke['member'], True, admin,
                                 revoke['body']['reason']) or
                                not ISO_MS.match(str(c.get('revokedAt')))):
                    err = 'revoked %s: %r' % (revoke['cid'], c)
                if not err:
                    self.acks.revoke(revoke['eid'], revoke['cid'])
            if err:
                if resp.status not in (503, 504):  # a wrong answer: not sent again
                    revoke.clear()
                return err
            revoke.clear()
            return None
        cases.append(Case('revoke', make=make_revoke, expect=expect_revoke))
        return cases

    def churn(self, worker, rng):
        """One member of this worker's per entity, added, awarded once, removed and added
        again, in turn; each step sent again unchanged after a 503/504 until answered."""
        token = uuid.uuid4().hex[:6]
        mine = {eid: '0x%08x%032x' % (worker, rng.randrange(1 << 120)) for eid in self.eids}
        for eid, m in mine.items():
            self.churners[eid].add(m)
        awarded = set()
        churn_state = {}  # eid -> the next step for this worker's member there
        step = {}  # in flight: kind ('add', 'award', 'remove'), eid, method, path, body, tries

        def make():
            if not step:
                eid = self.eids[rng.randrange(len(self.eids))]
                m = mine[eid]
                kind = churn_state.get(eid, 'add')
                step.update(kind=kind, eid=eid, tries=0, body=None)
                if kind == 'add':
                    step.update(method='POST', path='/api/entities/%s/force-add?%s' % (
                        eid, self.admin_auth), body={'addresses': [m], 'Chain': 'eth'})
                elif kind == 'award':
                    key = 'churn%d-%s-%s' % (worker, token, eid[-6:])
                    step.update(method='POST', path='/api/entities/%s/contributions?%s' % (
                        eid, self.admin_auth), body={
                            'member': m, 'xp': rng.randrange(1, 20), 'title': 'idem ' + key,
                            'skills': [{'skillId': self.skills[eid][0], 'score': 1}],
                            'idempotencyKey': key})
                else:
                    step.update(method='DELETE', path='/api/entities/%s/members/%s?%s' % (
                        eid, m, self.admin_auth))
            step['tries'] += 1
            return step['method'], step['path'], step['body'], None

        def expect(resp):
            b = _json(resp) or {}
            kind, eid = step['kind'], step['eid']
            if kind == 'award':
                replay = step['tries'] > 1 and resp.status == 200
                err = ok_json(200 if replay else 201)(resp)
                if not err and replay and b.get('replayed') is not True:
                    err = 'a retried churn award answered 200 without replayed'
                d = b.get('data') or {}
                if not err and (d.get('member'), d.get('xp')) != (mine[eid], step['body']['xp']):
                    err = 'churn award answered %r' % resp.body[:200]
                if not err:
                    self.acks.award(eid, [d])
                    awarded.add(eid)
                    nxt = 'remove'
            else:
                err = ok_json(200)(resp)
                done = ('added', 'existing') if kind == 'add' else ('removed', 'missing')
                if not err and (not all(isinstance(b.get(k), int) for k in done) or
                                b[done[0]] + b[done[1]] != 1 or
                                (step['tries'] == 1 and b[done[0]] != 1)):
                    err = 'churn %s answered %r' % (kind, resp.body[:200])
                nxt = ('remove' if eid in awarded else 'award') if kind == 'add' else 'add'
            if err:
                if resp.status not in (503, 504):  # a wrong answer: not sent again
                    step.clear()
                return err
            churn_state[eid] = nxt
            step.clear()
            return None
        return Case('churn', make=make, expect=expect)
