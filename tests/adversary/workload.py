"""A small data set and the well-behaved requests on it, shared by the adversary tests and
scripts/chaos: entities with aliases, admins, skills and levels, read and written through the
API by Checker threads whose every answer is checked.

    world = World(port, wallets)          # creates the data set through the API
    cases = world.cases(worker, versions, writes=True)
    Checker(port, cases, seconds).start()

Write cases accept the answers a correct service gives under concurrency (409 for an alias
another entity holds); reads check the answer is the right entity, skills or members page."""

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'integration'))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from clients import Case, error_envelope, ok_json, random_entity_id  # noqa: E402

ENTITIES = 3
ALIAS_POOL = ['guild-%d' % k for k in range(5)]  # fewer than entities x 2: claims collide


def _json(resp):
    try:
        return json.loads(resp.body.decode('utf-8'))
    except ValueError:
        return None


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
        rng.shuffle(cases)
        return cases
