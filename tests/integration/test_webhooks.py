"""Webhook endpoints (CONTRACT section 14): made, listed, read, changed, deleted and given new
secrets by an entity's owners and admins (and platform admins, and an admin-scope API key), and
for every entity by platform admins; at most 10 each; the secret answered only at creation and
rotation, the previous one kept 24 h beside the new; every input checked; URLs whose host is, or
resolves to, an address a delivery may not reach refused at creation (unless
WEBHOOK_ALLOW_PRIVATE); an endpoint disabled when its creator stops being an owner or admin; the
routes 404 once the entity is deleted. Records are checked in Redis as keys.h shapes them."""

import base64
import json
import os
import re
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import logscan  # noqa: E402
from harness import auth_query  # noqa: E402

ISO = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$')
WID = re.compile(r'^wh-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')
FIELDS = ['id', 'url', 'events', 'description', 'enabled', 'createdAt', 'createdBy',
          'disabledReason']
URL = 'https://127.0.0.1:9/hooks/secret-path-token'
GONE = 'creator is no longer an owner or admin'
SECRETS = set()  # every secret answered: none may reach a log
ROLES = ['owner', 'owner2', 'admin', 'admin2', 'member', 'stranger', 'platform']

# Numeric spellings of refused addresses (net/addrguard.h), each a URL host.
REFUSED_HOSTS = ['127.0.0.1', '127.1', '0x7f.1', '0x7f000001', '2130706433', '017700000001',
                 '0', '0.0.0.0', '10.0.0.1', '172.16.0.1', '192.168.1.1', '169.254.169.254',
                 '100.64.0.1', '198.18.0.1', '224.0.0.1', '240.0.0.1', '255.255.255.255',
                 '[::1]', '[::]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[64:ff9b::7f00:1]',
                 '[fe80::1]', '[fc00::1]', '[ff02::1]', '[2002:7f00:1::]', '[::127.0.0.1]']


class WebhooksTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.w = dict(zip(ROLES, harness.Wallet.random(len(ROLES))))
        base = {'PLATFORM_ADMINS': cls.w['platform'].address, 'RATE_WRITES_PER_MINUTE': '0',
                'ENTITY_CREATE_PER_DAY': '0'}
        # Loopback receivers in the URLs: the guard off, as every test but the SSRF ones.
        cls.svc = cls.class_entityd(redis=cls.r, env=dict(base, WEBHOOK_ALLOW_PRIVATE='true'))
        cls.strict = cls.class_entityd(redis=cls.r, env=base)
        cls.plain_http = cls.class_entityd(redis=cls.r, env=dict(
            base, WEBHOOK_ALLOW_PRIVATE='true', WEBHOOK_ALLOW_HTTP='true'))
        msg, _ = harness.current_message(cls.svc.port)
        cls.q = {n: auth_query(*w.sign(msg)) for n, w in cls.w.items()}

    @classmethod
    def tearDownClass(cls):
        logs = ''.join(s.stdout() + s.stderr() for s in (cls.svc, cls.strict, cls.plain_http))
        super().tearDownClass()
        leaked = [s for s in SECRETS if s[6:] in logs]
        if logscan.scan_text(logs) or leaked or 'secret-path-token' in logs:
            raise AssertionError('a secret or a URL in the logs')

    # ---- helpers ----------------------------------------------------------------------------

    def call(self, who, method, path, body=None, svc=None, headers=None):
        if who:
            path += ('&' if '?' in path else '?') + self.q[who]
        st, h, b = (svc or self.svc).request(method, path, body, headers=headers)
        if isinstance(b, dict) and isinstance(b.get('data'), dict) and 'secret' in b['data']:
            SECRETS.add(b['data']['secret'])
        return st, h, b

    def entity(self, owners=('owner',), admins=('admin', 'admin2')):
        st, _, b = self.call('owner', 'POST', '/api/entities', {
            'name': 'Hooks Guild', 'description': '', 'twitter': '', 'discord': '',
            'website': '', 'imageUrl': '', 'ownerAddresses': [self.w[o].address for o in owners]})
        self.assertEqual(st, 201, b)
        eid = b['data']['id']
        if admins:
            st, _, b = self.call('owner', 'POST', '/api/entities/%s/admins' % eid,
                                 {'addresses': [self.w[a].address for a in admins]})
            self.assertEqual(st, 200, b)
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/force-add' % eid,
                             {'addresses': [self.w['member'].address], 'Chain': 'eth'})
        self.assertEqual(st, 200, b)
        return eid

    def hooks(self, eid=None):
        return '/api/entities/%s/webhooks' % eid if eid else '/api/webhooks'

    def create(self, eid, who='owner', body=None, status=201, svc=None):
        st, _, b = self.call(who, 'POST', self.hooks(eid), body or {'url': URL}, svc=svc)
        self.assertEqual(st, status, b)
        return b['data'] if st == 201 else b

    def refused(self, st, b, status, code, field=None):
        self.assertEqual(st, status, b)
        self.assertIs(b['success'], False, b)
        self.assertEqual(b['error']['code'], code, b)
        if field:
            self.assertEqual(b['error'].get('field'), field, b)

    def stored(self, eid, wid):
        v = self.r.cli('HGET', 'ent:{%s}:webhooks' % eid if eid else 'webhooks:{platform}', wid)
        return v.decode() if v is not None else None

    def listed(self):
        return {x.decode() for x in self.r.cli('ZRANGE', 'webhooks', '0', '-1') or []}

    def events(self, eid, etype):
        flat = self.r.cli('XRANGE', 'ent:{%s}:events' % eid, '-', '+') or []
        out = []
        for _, fields in flat:
            fields = [x.decode() for x in fields]
            f = dict(zip(fields[0::2], fields[1::2]))
            if f['type'] == etype:
                out.append(f)
        return out

    @staticmethod
    def in_order(made):
        """Ids as a list answers them: by createdAt, then id."""
        return [x['id'] for x in sorted(made, key=lambda x: (x['createdAt'], x['id']))]

    def check_secret(self, secret):
        self.assertTrue(secret.startswith('whsec_'), secret)
        self.assertEqual(len(base64.b64decode(secret[6:], validate=True)), 32)

    # ---- the endpoints -------------------------------------------------------------------------

    def test_create_list_get(self):
        eid = self.entity()
        before = time.time()
        d = self.create(eid, body={'url': URL, 'events': ['level.reached', 'member.added'],
                                   'description': 'Discord bot'})
        self.assertEqual(list(d), FIELDS + ['secret'], d)
        self.assertRegex(d['id'], WID)
        self.assertEqual((d['url'], d['events'], d['description'], d['enabled']),
                         (URL, ['level.reached', 'member.added'], 'Discord bot', True))
        self.assertEqual((d['createdBy'], d['disabledReason']), (self.w['owner'].address, None))
        self.assertRegex(d['createdAt'], ISO)
        self.assertGreaterEqual(time.mktime(time.strptime(d['createdAt'][:19],
                                                          '%Y-%m-%dT%H:%M:%S')) - time.timezone,
                                int(before) - 1)
        self.check_secret(d['secret'])
        # Stored as keys.h shapes it: the answer without its secret; the secret beside it; the
        # endpoint in the webhooks zset.
        shown = dict(d)
        del shown['secret']
        self.assertEqual(json.loads(self.stored(eid, d['id'])), shown)
        self.assertEqual(self.stored(eid, 'sec:' + d['id']), d['secret'])
        self.assertIn('%s:%s' % (eid, d['id']), self.listed())
        # An admin and a platform admin make theirs; events absent is all ([]).
        a = self.create(eid, 'admin')
        p = self.create(eid, 'platform', body={'url': URL, 'events': []})
        self.assertEqual((a['events'], a['description'], a['createdBy']),
                         ([], '', self.w['admin'].address))
        self.assertNotEqual(a['secret'], d['secret'])
        for who in ('owner', 'admin', 'platform'):
            st, _, b = self.call(who, 'GET', self.hooks(eid))
            self.assertEqual(st, 200, b)
            self.assertEqual([x['id'] for x in b['data']], self.in_order([d, a, p]))
            self.assertIn(shown, b['data'])
            self.assertNotIn('whsec_', repr(b))
            st, _, b = self.call(who, 'GET', '%s/%s' % (self.hooks(eid), a['id']))
            self.assertEqual(st, 200, b)
            self.assertEqual(b['data']['id'], a['id'])
            self.assertNotIn('secret', b['data'])
        for who in ('member', 'stranger'):
            st, _, b = self.call(who, 'GET', self.hooks(eid))
            self.refused(st, b, 403, 'forbidden')
            st, _, b = self.call(who, 'POST', self.hooks(eid), {'url': URL})
            self.refused(st, b, 403, 'forbidden')
        # Unknown and malformed endpoint ids.
        for wid in ('wh-' + str(uuid.uuid4()), 'nope', 'wh-' + 'x' * 36):
            for method, suffix in (('GET', ''), ('DELETE', ''), ('POST', '/update'),
                                   ('POST', '/rotate-secret')):
                st, _, b = self.call('owner', method, '%s/%s%s' % (self.hooks(eid), wid, suffix),
                                     {} if method == 'POST' else None)
                self.refused(st, b, 404, 'not_found')

    def test_update(self):
        eid = self.entity()
        d = self.create(eid, 'admin')
        path = '%s/%s/update' % (self.hooks(eid), d['id'])
        st, _, b = self.call('owner', 'POST', path, {
            'url': 'https://127.0.0.1:9/other', 'events': ['skill.added', 'skill.added'],
            'description': 'changed', 'enabled': False})
        self.assertEqual(st, 200, b)
        want = dict(d, url='https://127.0.0.1:9/other', events=['skill.added'],
                    description='changed', enabled=False)
        del want['secret']
        self.assertEqual(b['data'], want)
        self.assertEqual(list(b['data']), FIELDS)
        # Only what is given changes; enabled again.
        st, _, b = self.call('admin', 'POST', path, {'enabled': True})
        self.assertEqual(st, 200, b)
        self.assertEqual(b['data'], dict(want, enabled=True))
        st, _, b = self.call('owner', 'POST', path, {})
        self.assertEqual((st, b['data']), (200, dict(want, enabled=True)))
        st, _, b = self.call('owner', 'GET', '%s/%s' % (self.hooks(eid), d['id']))
        self.assertEqual(b['data'], dict(want, enabled=True))
        self.assertEqual(self.stored(eid, 'sec:' + d['id']), d['secret'])
        for who in ('member', 'stranger'):
            st, _, b = self.call(who, 'POST', path, {'enabled': False})
            self.refused(st, b, 403, 'forbidden')

    def test_delete(self):
        eid = self.entity()
        d = self.create(eid)
        kept = self.create(eid)
        path = '%s/%s' % (self.hooks(eid), d['id'])
        self.r.cli('HSET', 'ent:{%s}:wh:%s' % (eid, d['id']), 'cursor', '0-1')
        self.r.cli('ZADD', 'ent:{%s}:wh:%s:due' % (eid, d['id']), '1', 'x')
        st, _, b = self.call('stranger', 'DELETE', path)
        self.refused(st, b, 403, 'forbidden')
        st, _, b = self.call('admin', 'DELETE', path)
        self.assertEqual((st, b), (200, {'success': True, 'deleted': True}))
        self.assertIsNone(self.stored(eid, d['id']))
        self.assertIsNone(self.stored(eid, 'sec:' + d['id']))
        self.assertEqual(self.r.cli('EXISTS', 'ent:{%s}:wh:%s' % (eid, d['id']),
                                    'ent:{%s}:wh:%s:due' % (eid, d['id'])), 0)
        self.assertNotIn('%s:%s' % (eid, d['id']), self.listed())
        self.assertIn('%s:%s' % (eid, kept['id']), self.listed())
        st, _, b = self.call('owner', 'GET', path)
        self.refused(st, b, 404, 'not_found')
        st, _, b = self.call('owner', 'DELETE', path)
        self.refused(st, b, 404, 'not_found')
        st, _, b = self.call('owner', 'GET', self.hooks(eid))
        self.assertEqual([x['id'] for x in b['data']], [kept['id']])

    def test_validation(self):
        eid = self.entity()
        listed = self.listed()
        long_url = 'https://127.0.0.1/' + 'a' * 2040
        cases = [
            ({}, 'url'), ({'url': 5}, 'url'), ({'url': ''}, 'url'), ({'url': '/relative'}, 'url'),
            ({'url': 'http://127.0.0.1:9/'}, 'url'), ({'url': 'ftp://127.0.0.1/'}, 'url'),
            ({'url': 'javascript:alert(1)'}, 'url'), ({'url': 'https://'}, 'url'),
            ({'url': 'https://127.0.0.1/a#frag'}, 'url'), ({'url': long_url}, 'url'),
            ({'url': 'https://127.0.0.1/a b'}, 'url'), ({'url': 'https://127.0.0.1/\u0007'}, 'url'),
            ({'url': URL, 'events': 'level.reached'}, 'events'),
            ({'url': URL, 'events': {'a': 1}}, 'events'),
            ({'url': URL, 'events': ['level.reached', 'level.exploded']}, 'events[1]'),
            ({'url': URL, 'events': [7]}, 'events[0]'),
            ({'url': URL, 'events': ['webhook.test']}, 'events[0]'),
            ({'url': URL, 'description': 5}, 'description'),
            ({'url': URL, 'description': 'x' * 501}, 'description'),
            ({'url': URL, 'description': 'bell\u0007'}, 'description'),
        ]
        for body, field in cases:
            with self.subTest(body=repr(body)[:60]):
                st, _, b = self.call('owner', 'POST', self.hooks(eid), body)
                self.refused(st, b, 400, 'invalid_request', field)
                st, _, b = self.call('platform', 'POST', self.hooks(None), body)
                self.refused(st, b, 400, 'invalid_request', field)
        st, _, b = self.call('owner', 'POST', self.hooks(eid), [URL])
        self.refused(st, b, 400, 'invalid_json')
        # Bounds that pass: 500 characters, every known type, a URL of 2048.
        ok_url = 'https://127.0.0.1/' + 'a' * (2048 - len('https://127.0.0.1/'))
        types = ['admin.added', 'admin.removed', 'contribution.added', 'contribution.revoked',
                 'entity.updated', 'level.deleted', 'level.reached', 'level.updated',
                 'member.added', 'member.left', 'member.removed', 'skill.added',
                 'skill.deleted', 'skill.updated', 'webhook.disabled', 'member.joined',
                 'member.lapsed', 'joinrules.updated', 'skill.moved']
        d = self.create(eid, body={'url': ok_url, 'events': types, 'description': '\u00e9' * 500})
        self.assertEqual((d['url'], d['events']), (ok_url, types))
        # Update: the same checks, and enabled a boolean; nothing changed by a refusal.
        path = '%s/%s/update' % (self.hooks(eid), d['id'])
        for body, field in cases[1:] + [({'enabled': 'yes'}, 'enabled')]:
            with self.subTest(update=repr(body)[:60]):
                st, _, b = self.call('owner', 'POST', path, body)
                self.refused(st, b, 400, 'invalid_request', field)
        st, _, b = self.call('owner', 'GET', '%s/%s' % (self.hooks(eid), d['id']))
        self.assertEqual((b['data']['url'], b['data']['events']), (ok_url, types))
        self.assertEqual(self.r.cli('HLEN', 'ent:{%s}:webhooks' % eid), 2)
        self.assertEqual(self.listed() - listed, {'%s:%s' % (eid, d['id'])})
        # http with WEBHOOK_ALLOW_HTTP; never another scheme.
        d = self.create(eid, body={'url': 'http://127.0.0.1:9/plain'}, svc=self.plain_http)
        self.assertEqual(d['url'], 'http://127.0.0.1:9/plain')
        st, _, b = self.call('owner', 'POST', self.hooks(eid), {'url': 'ftp://127.0.0.1/'},
                             svc=self.plain_http)
        self.refused(st, b, 400, 'invalid_request', 'url')

    def test_at_most_ten(self):
        eid = self.entity()
        made = [self.create(eid, ('owner', 'admin', 'platform')[i % 3]) for i in range(10)]
        listed = self.listed()
        st, _, b = self.call('admin', 'POST', self.hooks(eid), {'url': URL})
        self.refused(st, b, 409, 'conflict')
        # The refused create's entry, written ahead, is gone again.
        self.assertEqual(self.listed(), listed)
        self.assertEqual(self.r.cli('HLEN', 'ent:{%s}:webhooks' % eid), 20)
        st, _, b = self.call('owner', 'DELETE', '%s/%s' % (self.hooks(eid), made[0]['id']))
        self.assertEqual(st, 200, b)
        self.create(eid, 'admin')
        # Another entity has room of its own.
        self.create(self.entity())

    def test_rotation(self):
        eid = self.entity()
        d = self.create(eid)
        s0 = d['secret']
        path = '%s/%s/rotate-secret' % (self.hooks(eid), d['id'])
        for who in ('member', 'stranger'):
            st, _, b = self.call(who, 'POST', path)
            self.refused(st, b, 403, 'forbidden')
        self.assertEqual(self.stored(eid, 'sec:' + d['id']), s0)
        t = time.time() * 1000
        st, _, b = self.call('admin', 'POST', path)
        self.assertEqual(st, 200, b)
        s1 = b['data']['secret']
        self.check_secret(s1)
        self.assertNotEqual(s1, s0)
        self.assertEqual(b['data']['id'], d['id'])
        new, prev, end = self.stored(eid, 'sec:' + d['id']).split(' ')
        self.assertEqual((new, prev), (s1, s0))
        self.assertAlmostEqual(int(end), t + 86400000, delta=60000)
        # A second rotation within the 24 h drops the oldest.
        st, _, b = self.call('owner', 'POST', path)
        s2 = b['data']['secret']
        new, prev, end2 = self.stored(eid, 'sec:' + d['id']).split(' ')
        self.assertEqual((new, prev), (s2, s1))
        self.assertGreaterEqual(int(end2), int(end))
        st, _, b = self.call('owner', 'GET', self.hooks(eid))
        for s in (s0, s1, s2):
            self.assertNotIn(s[6:], repr(b))

    def test_platform_endpoints(self):
        for who in ROLES[:-1]:
            st, _, b = self.call(who, 'POST', self.hooks(None), {'url': URL})
            self.refused(st, b, 403, 'forbidden')
            st, _, b = self.call(who, 'GET', self.hooks(None))
            self.refused(st, b, 403, 'forbidden')
        st, _, b = self.call(None, 'GET', self.hooks(None))
        self.refused(st, b, 400, 'invalid_request', 'address')
        st, _, b = self.call('platform', 'GET', self.hooks(None))
        for x in b['data']:  # another test's leftovers: none here, but be sure
            self.call('platform', 'DELETE', '%s/%s' % (self.hooks(None), x['id']))
        made = [self.create(None, 'platform', body={'url': URL, 'events': ['member.added'],
                                                    'description': 'all %d' % i})
                for i in range(10)]
        d = made[0]
        self.assertRegex(d['id'], WID)
        self.assertEqual((d['createdBy'], d['events']), (self.w['platform'].address,
                                                         ['member.added']))
        self.check_secret(d['secret'])
        self.assertIn('platform:' + d['id'], self.listed())
        self.assertEqual(self.stored(None, 'sec:' + d['id']), d['secret'])
        listed = self.listed()
        st, _, b = self.call('platform', 'POST', self.hooks(None), {'url': URL})
        self.refused(st, b, 409, 'conflict')
        self.assertEqual(self.listed(), listed)
        st, _, b = self.call('platform', 'GET', self.hooks(None))
        self.assertEqual([x['id'] for x in b['data']], self.in_order(made))
        self.assertNotIn('whsec_', repr(b))
        one = '%s/%s' % (self.hooks(None), d['id'])
        for who in ('owner', 'admin', 'stranger'):
            for method, suffix in (('GET', ''), ('DELETE', ''), ('POST', '/update'),
                                   ('POST', '/rotate-secret')):
                st, _, b = self.call(who, method, one + suffix,
                                     {} if method == 'POST' else None)
                self.refused(st, b, 403, 'forbidden')
        st, _, b = self.call('platform', 'GET', one)
        self.assertEqual(b['data']['description'], 'all 0')
        st, _, b = self.call('platform', 'POST', one + '/update', {'enabled': False,
                                                                     'events': []})
        self.assertEqual((st, b['data']['enabled'], b['data']['events']), (200, False, []))
        st, _, b = self.call('platform', 'POST', one + '/rotate-secret')
        self.assertEqual(st, 200, b)
        self.assertEqual(self.stored(None, 'sec:' + d['id']).split(' ')[:2],
                         [b['data']['secret'], d['secret']])
        st, _, b = self.call('platform', 'DELETE', one)
        self.assertEqual(st, 200, b)
        self.assertNotIn('platform:' + d['id'], self.listed())
        st, _, b = self.call('platform', 'GET', one)
        self.refused(st, b, 404, 'not_found')
        for x in made[1:]:
            st, _, b = self.call('platform', 'DELETE', '%s/%s' % (self.hooks(None), x['id']))
            self.assertEqual(st, 200, b)

    def test_api_keys(self):
        eid, other = self.entity(), self.entity()
        keys = {}
        for scope in ('admin', 'award'):
            st, _, b = self.call('owner', 'POST', '/api/entities/%s/api-keys' % eid,
                                 {'name': scope, 'scope': scope})
            self.assertEqual(st, 201, b)
            keys[scope] = {'Authorization': 'Bearer ' + b['data']['key']}
        st, _, b = self.call(None, 'POST', self.hooks(eid), {'url': URL}, headers=keys['admin'])
        self.assertEqual(st, 201, b)
        self.assertEqual(b['data']['createdBy'], self.w['owner'].address)
        st, _, b = self.call(None, 'GET', self.hooks(eid), headers=keys['admin'])
        self.assertEqual(st, 200, b)
        for method, path in (('POST', self.hooks(eid)), ('GET', self.hooks(eid)),
                             ('POST', self.hooks(other)), ('GET', self.hooks(None)),
                             ('POST', self.hooks(None))):
            for key in keys.values():
                if key is keys['admin'] and path == self.hooks(eid):
                    continue
                st, _, b = self.call(None, method, path, {'url': URL} if method == 'POST'
                                     else None, headers=key)
                self.refused(st, b, 403, 'forbidden')

    # ---- the creator's role -------------------------------------------------------------------

    def test_creator_losing_the_role_disables_its_endpoints(self):
        eid = self.entity(owners=('owner', 'owner2'), admins=('admin', 'admin2', 'owner2'))
        mine = {who: self.create(eid, who) for who in ('owner', 'owner2', 'admin', 'admin2')}
        plat = self.create(eid, 'platform')
        # admin removed: its endpoint goes off, with one event; the others stay.
        st, _, b = self.call('owner', 'DELETE', '/api/entities/%s/admins/%s' %
                             (eid, self.w['admin'].address))
        self.assertEqual(st, 200, b)
        st, _, b = self.call('owner', 'GET', self.hooks(eid))
        by = {x['id']: x for x in b['data']}
        self.assertEqual((by[mine['admin']['id']]['enabled'],
                          by[mine['admin']['id']]['disabledReason']), (False, GONE))
        for who in ('owner', 'owner2', 'admin2'):
            self.assertEqual((by[mine[who]['id']]['enabled'],
                              by[mine[who]['id']]['disabledReason']), (True, None), who)
        self.assertIs(by[plat['id']]['enabled'], True)
        ev = self.events(eid, 'webhook.disabled')
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual(json.loads(ev[0]['data']), {'webhookId': mine['admin']['id'],
                                                      'reason': GONE})
        self.assertEqual(ev[0]['actor'], self.w['owner'].address)
        st, _, b = self.call('owner', 'GET', '/api/entities/%s/events' % eid)
        self.assertIn('webhook.disabled', [x['type'] for x in b['data']])
        # It may not be enabled again while its creator holds no role.
        path = '%s/%s/update' % (self.hooks(eid), mine['admin']['id'])
        st, _, b = self.call('owner', 'POST', path, {'enabled': True})
        self.refused(st, b, 409, 'conflict', 'enabled')
        # owner2 leaves the owners but is an admin still: keeps it. Then steps down as admin
        # (its own removal): now it goes.
        body = {'id': eid, 'name': 'Hooks Guild', 'description': '', 'twitter': '',
                'discord': '', 'website': '', 'imageUrl': '',
                'ownerAddresses': [self.w['owner'].address]}
        st, _, b = self.call('owner', 'POST', '/api/entities', body)
        self.assertEqual(st, 200, b)
        self.assertIs(json.loads(self.stored(eid, mine['owner2']['id']))['enabled'], True)
        st, _, b = self.call('owner2', 'DELETE', '/api/entities/%s/admins/%s' %
                             (eid, self.w['owner2'].address))
        self.assertEqual(st, 200, b)
        self.assertEqual(json.loads(self.stored(eid, mine['owner2']['id']))['disabledReason'],
                         GONE)
        self.assertEqual(len(self.events(eid, 'webhook.disabled')), 2)
        # An owner who is no admin, taken off the owners: its endpoint goes.
        body['ownerAddresses'] = [self.w['owner'].address, self.w['owner2'].address]
        st, _, b = self.call('owner', 'POST', '/api/entities', body)
        self.assertEqual(st, 200, b)
        later = self.create(eid, 'owner2')
        body['ownerAddresses'] = [self.w['owner'].address]
        st, _, b = self.call('owner', 'POST', '/api/entities', body)
        self.assertEqual(st, 200, b)
        w = json.loads(self.stored(eid, later['id']))
        self.assertEqual((w['enabled'], w['disabledReason']), (False, GONE))
        # Back as an admin, owner2's endpoints may be enabled again (not by themselves).
        self.assertIs(json.loads(self.stored(eid, mine['owner']['id']))['enabled'], True)
        self.assertIs(json.loads(self.stored(eid, mine['admin2']['id']))['enabled'], True)
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/admins' % eid,
                             {'addresses': [self.w['owner2'].address]})
        self.assertEqual(st, 200, b)
        st, _, b = self.call('owner', 'POST', '%s/%s/update' % (self.hooks(eid), later['id']),
                             {'enabled': True})
        self.assertEqual((st, b['data']['enabled'], b['data']['disabledReason']),
                         (200, True, None))

    def test_entity_deleted(self):
        eid = self.entity()
        d = self.create(eid)
        st, _, b = self.call('owner', 'DELETE', '/api/entities/%s' % eid)
        self.assertEqual(st, 200, b)
        one = '%s/%s' % (self.hooks(eid), d['id'])
        for method, path in (('POST', self.hooks(eid)), ('GET', self.hooks(eid)), ('GET', one),
                             ('POST', one + '/update'), ('DELETE', one),
                             ('POST', one + '/rotate-secret')):
            for who in ('owner', 'platform'):
                st, _, b = self.call(who, method, path, {'url': URL} if method == 'POST'
                                     else None)
                self.refused(st, b, 404, 'not_found')

    # ---- SSRF ---------------------------------------------------------------------------------

    def test_refused_addresses(self):
        eid = self.entity()
        listed = self.listed()
        for host in REFUSED_HOSTS + ['localhost']:
            with self.subTest(host=host):
                url = 'https://%s:8443/hook' % host
                st, _, b = self.call('owner', 'POST', self.hooks(eid), {'url': url},
                                     svc=self.strict)
                self.refused(st, b, 400, 'invalid_request', 'url')
                st, _, b = self.call('platform', 'POST', self.hooks(None), {'url': url},
                                     svc=self.strict)
                self.refused(st, b, 400, 'invalid_request', 'url')
        self.assertEqual(self.r.cli('HLEN', 'ent:{%s}:webhooks' % eid), 0)
        self.assertEqual(self.listed(), listed)
        # A public address may be named (it is not reached here: no event follows).
        d = self.create(eid, body={'url': 'https://8.8.8.8/hook'}, svc=self.strict)
        path = '%s/%s' % (self.hooks(eid), d['id'])
        # An update to a refused host is refused too, and changes nothing.
        for host in ('localhost', '127.1', '[::ffff:127.0.0.1]'):
            st, _, b = self.call('owner', 'POST', path + '/update',
                                 {'url': 'https://%s/x' % host}, svc=self.strict)
            self.refused(st, b, 400, 'invalid_request', 'url')
        self.assertEqual(self.call('owner', 'GET', path)[2]['data']['url'],
                         'https://8.8.8.8/hook')
        self.assertEqual(self.call('owner', 'DELETE', path)[0], 200)
        # Refused for who is asking before the host is looked at (CONTRACT section 12).
        for who in ('stranger', 'member'):
            st, _, b = self.call(who, 'POST', self.hooks(eid),
                                 {'url': 'https://localhost/x'}, svc=self.strict)
            self.refused(st, b, 403, 'forbidden')
        # WEBHOOK_ALLOW_PRIVATE=true lets them all through.
        d = self.create(eid, body={'url': 'https://localhost:8443/hook'})
        self.assertEqual(d['url'], 'https://localhost:8443/hook')
        d = self.create(eid, body={'url': 'https://[::1]:8443/hook'})
        d = self.create(eid, body={'url': 'https://127.1/hook'})
        self.assertEqual(d['url'], 'https://127.0.0.1/hook')


if __name__ == '__main__':
    harness.main()
