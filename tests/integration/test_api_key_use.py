"""Entity API keys as credentials (CONTRACT section 13, "Entity API keys"): `Authorization:
Bearer ek_…` awards and revokes as its creator, with apiKeyId in the record and the events;
reads of award scope; admin-only routes need scope admin; owner-only routes and other entities
refuse any key (403); a deleted key, or one whose creator stopped being an owner, is refused by
every instance (401); a key's writes spend a budget of its own; no key in any log line or
answer. Keys are made through POST /api/entities/{id}/api-keys, as an owner makes them."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import auth_query, fresh_wallet, metric, scaled  # noqa: E402
from support.apikeys import apikeys_key  # noqa: E402

ENV = {'LOG_LEVEL': 'debug'}
USED = []  # every key sent in this run, looked for in the logs at the end


def bearer(key):
    USED.append(key)
    return {'Authorization': 'Bearer ' + key}


class ApiKeyUseTest(harness.ServiceTestCase):
    """Two instances (A, B) on one Redis, and C with a write budget of 3 a minute."""

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.a = cls.class_entityd(redis=cls.r, env=ENV)
        cls.b = cls.class_entityd(redis=cls.r, env=ENV)
        cls.c = cls.class_entityd(redis=cls.r, env=dict(ENV, RATE_WRITES_PER_MINUTE='3',
                                                         RATE_LEASE_MS='0'))
        cls.owner, cls.owner2 = fresh_wallet(), fresh_wallet()
        cls.member, cls.stranger = fresh_wallet(), fresh_wallet()
        msg, _ = harness.current_message(cls.a.port)
        cls.owner_q = auth_query(*cls.owner.sign(msg))
        cls.owner2_q = auth_query(*cls.owner2.sign(msg))
        cls.eid = cls.create(cls)
        cls.other = cls.create(cls)

    def create(self, owners=None):
        owners = owners or [self.owner.address, self.owner2.address]
        body = {'name': 'Key Guild', 'description': 'keys', 'ownerAddresses': owners,
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'public': False}
        st, _, b = self.a.request('POST', '/api/entities?' + self.owner_q, body)
        assert st == 201, (st, b)
        eid = b['data']['id']
        st, _, b = self.a.request('POST', '/api/entities/%s/force-add?%s' % (eid, self.owner_q),
                                  {'addresses': [self.member.address], 'Chain': 'eth'})
        assert st == 200, (st, b)
        return eid

    def key(self, scope='award', creator=None, eid=None):
        """(key, id) of a key made as an owner makes one: POST /api/entities/{id}/api-keys."""
        q = self.owner2_q if creator is self.owner2 else self.owner_q
        st, _, b = self.a.request('POST', '/api/entities/%s/api-keys?%s' % (eid or self.eid, q),
                                  {'name': 'bot:1', 'scope': scope})
        assert st == 201, (st, b)
        return b['data']['key'], b['data']['id']

    def assertNoKey(self, resp, key):
        st, hdrs, body = resp
        self.assertNotIn(key, repr(body))
        self.assertNotIn(key, repr(hdrs))

    def assertRefused(self, resp, status, key):
        self.assertEnvelope(resp, status, 'unauthenticated' if status == 401 else 'forbidden')
        self.assertNoKey(resp, key)

    def invalidations(self, svc):
        return metric(svc, 'entityd_read_cache_invalidations_total', 0)

    def heard(self, before):
        """Waits until each instance has heard from Redis of a change made after `before`
        ({instance: invalidations}) was read: the key's kept check is dropped."""
        for svc, n in before.items():
            harness.wait_for(lambda: self.invalidations(svc) > n, scaled(5),
                             what='the invalidation heard')

    def award(self, svc, key, eid=None, title='By key'):
        return svc.request('POST', '/api/entities/%s/contributions' % (eid or self.eid),
                           {'member': self.member.address, 'title': title, 'xp': 3},
                           headers=bearer(key))

    def event(self, etype, cid):
        st, _, b = self.a.request('GET', '/api/entities/%s/events?%s&limit=100' %
                                  (self.eid, self.owner_q))
        self.assertEqual(st, 200, b)
        for e in b['data']:
            if e['type'] == etype and e['data'].get('id') == cid:
                return e
        self.fail('no %s event of %s' % (etype, cid))

    # --- awards, revokes, reads ---

    def test_award_and_revoke_with_award_key(self):
        key, kid = self.key()
        st, _, b = self.award(self.a, key)
        self.assertEqual(st, 201, b)
        rec = b['data']
        self.assertEqual(rec['createdBy'], self.owner.address.lower())
        self.assertEqual(rec['apiKeyId'], kid)
        cid = rec['id']
        # The stored record and the event name the creator and the key.
        st, _, b = self.a.request('GET', '/api/entities/%s/members/%s/contributions' %
                                  (self.eid, self.member.address), headers=bearer(key))
        self.assertEqual(st, 200, b)
        stored = [c for c in b['data'] if c['id'] == cid]
        self.assertEqual(len(stored), 1, b)
        self.assertEqual(stored[0]['apiKeyId'], kid)
        self.assertEqual(stored[0]['createdBy'], self.owner.address.lower())
        ev = self.event('contribution.added', cid)
        self.assertEqual(ev['actor'], self.owner.address.lower())
        self.assertEqual(ev['data']['apiKeyId'], kid)
        # A signed award of the same owner carries no apiKeyId.
        st, _, b = self.a.request('POST', '/api/entities/%s/contributions?%s' %
                                  (self.eid, self.owner_q),
                                  {'member': self.member.address, 'title': 'Signed', 'xp': 1})
        self.assertEqual(st, 201, b)
        self.assertNotIn('apiKeyId', b['data'])
        self.assertNotIn('apiKeyId', self.event('contribution.added', b['data']['id'])['data'])
        # The revoke.
        st, _, b = self.a.request('POST', '/api/entities/%s/contributions/%s/revoke' %
                                  (self.eid, cid), {'reason': 'wrong member'},
                                  headers=bearer(key))
        self.assertIn(st, (200, 201), b)
        self.assertEqual(b['data']['revokedBy'], self.owner.address.lower())
        ev = self.event('contribution.revoked', cid)
        self.assertEqual(ev['actor'], self.owner.address.lower())
        self.assertEqual(ev['data']['apiKeyId'], kid)

    def test_reads_with_award_key(self):
        key, _ = self.key()
        e, m = self.eid, self.member.address
        for path in ('/api/entities/%s' % e, '/api/entities/%s/users' % e,
                     '/api/skills?entityID=%s' % e,
                     '/api/entities/%s/members/%s/progress' % (e, m),
                     '/api/entities/%s/members/%s/contributions' % (e, m),
                     '/api/entities/%s/leaderboard' % e):
            for svc in (self.a, self.b):
                st, _, b = svc.request('GET', path, headers=bearer(key))
                self.assertEqual(st, 200, (path, b))

    def test_admin_routes_need_admin_scope(self):
        award, _ = self.key('award')
        admin, admin_id = self.key('admin')
        force = ('POST', '/api/entities/%s/force-add' % self.eid,
                 {'addresses': [fresh_wallet().address], 'Chain': 'eth'})
        skill = ('POST', '/api/skills', {'entityID': self.eid, 'name': 'Key skill',
                                          'description': ''})
        events = ('GET', '/api/entities/%s/events' % self.eid, None)
        for method, path, body in (force, skill, events):
            self.assertRefused(self.a.request(method, path, body, headers=bearer(award)), 403,
                               award)
        for method, path, body in (force, skill, events):
            st, _, b = self.a.request(method, path, body, headers=bearer(admin))
            self.assertIn(st, (200, 201), (path, b))
        # Their events name the creator as actor and add the key's id.
        st, _, b = self.a.request('GET', '/api/entities/%s/events?limit=100' % self.eid,
                                  headers=bearer(admin))
        self.assertEqual(st, 200, b)
        mine = [e for e in b['data'] if e['data'].get('apiKeyId') == admin_id]
        self.assertEqual(sorted({e['type'] for e in mine}), ['member.added', 'skill.added'],
                         b['data'])
        for e in mine:
            self.assertEqual(e['actor'].lower(), self.owner.address.lower())
        # The skill names the key's creator.
        st, _, b = self.a.request('GET', '/api/skills?entityID=%s' % self.eid,
                                  headers=bearer(admin))
        self.assertEqual(st, 200, b)
        self.assertIn(self.owner.address.lower(), repr(b['data']).lower())

    def test_owner_only_routes_refuse_keys(self):
        for scope in ('award', 'admin'):
            key, _ = self.key(scope)
            e = self.eid
            update = {'id': e, 'name': 'Taken', 'description': '',
                      'ownerAddresses': [self.stranger.address], 'twitter': '', 'discord': '',
                      'website': '', 'imageUrl': ''}
            for method, path, body in (
                    ('POST', '/api/entities', update),
                    ('DELETE', '/api/entities/%s' % e, None),
                    ('POST', '/api/entities/%s/admins' % e,
                     {'addresses': [self.stranger.address]}),
                    ('DELETE', '/api/entities/%s/admins/%s' % (e, self.owner2.address), None),
                    ('POST', '/api/entities/%s/leave' % e, None),
                    ('GET', '/api/wallets/%s/entities' % self.owner.address, None)):
                self.assertRefused(self.a.request(method, path, body, headers=bearer(key)), 403,
                                   key)
            # The api-keys routes themselves: refused (404 where they are not served).
            for method, path, body in (('GET', '/api/entities/%s/api-keys' % e, None),
                                       ('POST', '/api/entities/%s/api-keys' % e,
                                        {'name': 'x', 'scope': 'admin'})):
                st, _, b = self.a.request(method, path, body, headers=bearer(key))
                self.assertIn(st, (403, 404), b)
        # Nothing changed: the entity is there with its owners.
        st, _, b = self.a.request('GET', '/api/entities/%s?%s' % (self.eid, self.owner_q))
        self.assertEqual(st, 200, b)
        self.assertEqual(b['data']['name'], 'Key Guild')

    def test_other_entity_refused(self):
        key, _ = self.key('admin')
        o = self.other
        for method, path, body in (
                ('GET', '/api/entities/%s' % o, None),
                ('GET', '/api/skills?entityID=%s' % o, None),
                ('POST', '/api/entities/%s/contributions' % o,
                 {'member': self.member.address, 'title': 'x', 'xp': 1}),
                ('POST', '/api/skills', {'entityID': o, 'name': 'Elsewhere',
                                         'description': ''})):
            self.assertRefused(self.a.request(method, path, body, headers=bearer(key)), 403, key)

    # --- ending ---

    def test_deleted_key_refused_by_second_instance(self):
        key, kid = self.key()
        read = ('GET', '/api/entities/%s' % self.eid, None)
        write = ('POST', '/api/entities/%s/contributions' % self.eid,
                 {'member': self.member.address, 'title': 'Twice', 'xp': 1})
        for svc in (self.a, self.b):
            for method, path, body in (read, write, read):
                st, _, b = svc.request(method, path, body, headers=bearer(key))
                self.assertIn(st, (200, 201), b)
        # The touch has landed (its own invalidation is then on its way first).
        harness.wait_for(lambda: self.r.cli('HGET', apikeys_key(self.eid), 'u:' + kid),
                         scaled(5), what='lastUsedAt written')
        before = {svc: self.invalidations(svc) for svc in (self.a, self.b)}
        # Deleted by its owner through instance A: every instance refuses it once Redis has told
        # it (B on its next request after the announcement).
        st, _, b = self.a.request('DELETE', '/api/entities/%s/api-keys/%s?%s'
                                  % (self.eid, kid, self.owner_q))
        self.assertEqual(st, 200, b)
        self.heard(before)
        for svc in (self.b, self.a):
            for method, path, body in (read, write):
                self.assertRefused(svc.request(method, path, body, headers=bearer(key)), 401,
                                   key)
        # The touch never brings a field of it back.
        self.assertIsNone(self.r.cli('HGET', apikeys_key(self.eid), 'u:' + kid))

    def test_key_ends_when_its_creator_stops_being_an_owner(self):
        eid = self.create()
        key, _ = self.key('award', creator=self.owner2, eid=eid)
        for svc in (self.a, self.b):
            st, _, b = self.award(svc, key, eid)
            self.assertEqual(st, 201, b)
            self.assertEqual(b['data']['createdBy'], self.owner2.address.lower())
        update = {'id': eid, 'name': 'Key Guild', 'description': 'keys',
                  'ownerAddresses': [self.owner.address], 'twitter': '', 'discord': '',
                  'website': '', 'imageUrl': '', 'public': False}
        before = {self.b: self.invalidations(self.b)}
        st, _, b = self.a.request('POST', '/api/entities?' + self.owner_q, update)
        self.assertIn(st, (200, 201), b)
        self.heard(before)
        for svc in (self.b, self.a):
            self.assertRefused(self.award(svc, key, eid), 401, key)
            self.assertRefused(svc.request('GET', '/api/entities/%s' % eid, headers=bearer(key)),
                               401, key)

    # --- budgets ---

    def test_key_budget_is_its_own(self):
        # C allows 3 writes a minute per budget: the key's run out, its creator's signed ones
        # still pass (they are charged to the address, the key's to limit:{ek:<id>}).
        key, kid = self.key(creator=self.owner2)
        for i in range(3):
            st, _, b = self.award(self.c, key, title='Budget %d' % i)
            self.assertEqual(st, 201, b)
        resp = self.award(self.c, key, title='Over')
        self.assertEnvelope(resp, 429, 'rate_limited')
        self.assertNoKey(resp, key)
        self.assertIsNotNone(self.r.cli('GET', 'limit:{ek:%s}' % kid))
        msg, _ = harness.current_message(self.c.port)
        q = auth_query(*self.owner2.sign(msg))
        st, _, b = self.c.request('POST', '/api/entities/%s/contributions?%s' % (self.eid, q),
                                  {'member': self.member.address, 'title': 'Signed', 'xp': 1})
        self.assertEqual(st, 201, b)
        # A second key of the same creator has a budget of its own too.
        key2, _ = self.key(creator=self.owner2)
        st, _, b = self.award(self.c, key2, title='Other key')
        self.assertEqual(st, 201, b)

    # --- last: no key in any log line ---

    def test_zz_no_key_in_logs(self):
        key, _ = self.key()
        for svc in (self.a, self.b):
            st, _, b = svc.request('GET', '/api/entities/%s' % self.eid, headers=bearer(key))
            self.assertEqual(st, 200, b)
            resp = svc.request('GET', '/api/entities/%s' % self.eid,
                               headers=bearer(key[:-1] + ('0' if key[-1] != '0' else '1')))
            self.assertRefused(resp, 401, key)
            rid = resp[1]['x-request-id']
            harness.wait_for(lambda: [r for r in svc.logs() if r.get('request_id') == rid],
                             scaled(5), what='the request log line')
        self.assertGreater(len(USED), 5)
        for svc in (self.a, self.b, self.c):
            text = svc.stdout() + svc.stderr()
            for k in USED:
                self.assertNotIn(k, text)
                self.assertNotIn(k[3:], text)


if __name__ == '__main__':
    harness.main()
