"""Entity API keys made, listed and ended (CONTRACT section 13): owners (and platform admins)
make keys of scope award or admin, shown once and kept in Redis only as their hash; list them
without the key; delete them; at most 20 per entity; every change is an event; an entity's
erasure takes its keys with it; no key in any later answer or in any log line."""

import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import logscan  # noqa: E402
from harness import auth_query, scaled  # noqa: E402
from support.wallets import keccak256  # noqa: E402

KEYS = set()  # every key answered, for the answer and log checks


def key_id(key):
    return keccak256(key.encode()).hex()[:24]


class ApiKeysTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.w = dict(zip(['owner', 'admin', 'member', 'stranger', 'platform', 'budget'],
                         harness.Wallet.random(6)))
        cls.svc = cls.class_entityd(redis=cls.r,
                                    env={'PLATFORM_ADMINS': cls.w['platform'].address})
        # A small write budget: the key routes that write spend it as every owner write.
        cls.tight = cls.class_entityd(redis=cls.r, env={
            'PLATFORM_ADMINS': cls.w['platform'].address, 'RATE_WRITES_PER_MINUTE': '3'})
        msg, _ = harness.current_message(cls.svc.port)
        cls.q = {n: auth_query(*w.sign(msg)) for n, w in cls.w.items()}

    @classmethod
    def tearDownClass(cls):
        logs = ''.join(s.stdout() + s.stderr() for s in (cls.svc, cls.tight))
        super().tearDownClass()
        found = logscan.scan_text(logs)
        leaked = [k for k in KEYS if k in logs or k[3:] in logs or k[-32:] in logs]
        if found or leaked:
            raise AssertionError('keys in the logs: %d lines, %d keys' % (len(found), len(leaked)))

    # ---- helpers ----------------------------------------------------------------------------

    def call(self, who, method, path, body=None, svc=None):
        sep = '&' if '?' in path else '?'
        st, h, b = (svc or self.svc).request(method, path + sep + self.q[who], body)
        # No answer but a create's ever holds a key.
        text = repr(b)
        for k in KEYS:
            self.assertNotIn(k[3:], text, (method, path))
        return st, h, b

    def entity(self, public=True, owners=('owner',)):
        st, _, b = self.call('owner', 'POST', '/api/entities', {
            'name': 'Keys Guild', 'description': '', 'public': public, 'twitter': '',
            'discord': '', 'website': '', 'imageUrl': '',
            'ownerAddresses': [self.w[o].address for o in owners]})
        self.assertEqual(st, 201, b)
        eid = b['data']['id']
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/admins' % eid,
                             {'addresses': [self.w['admin'].address]})
        self.assertEqual(st, 200, b)
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/force-add' % eid,
                             {'addresses': [self.w['member'].address], 'Chain': 'eth'})
        self.assertEqual(st, 200, b)
        return eid

    def create(self, eid, name='ci bot', scope='award', who='owner', status=201, svc=None):
        st, _, b = self.call(who, 'POST', '/api/entities/%s/api-keys' % eid,
                             {'name': name, 'scope': scope}, svc=svc)
        self.assertEqual(st, status, b)
        if st == 201:
            KEYS.add(b['data']['key'])
            return b['data']
        return b

    def records(self, eid):
        flat = self.r.cli('HGETALL', 'ent:{%s}:apikeys' % eid) or []
        return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}

    def events(self, eid, etype):
        st, _, b = self.call('owner', 'GET', '/api/entities/%s/events?limit=1000' % eid)
        self.assertEqual(st, 200, b)
        return [e for e in b['data'] if e['type'] == etype]

    # ---- tests ------------------------------------------------------------------------------

    def test_create_shape_and_stored_hash(self):
        eid = self.entity()
        d = self.create(eid, name='  Award bot: CI  ', scope='award')
        self.assertEqual(set(d), {'id', 'name', 'scope', 'key', 'createdAt', 'createdBy'})
        self.assertRegex(d['key'], r'^ek_%s[0-9a-f]{32}$' % eid[2:].replace('-', ''))
        self.assertEqual(d['id'], key_id(d['key']))
        self.assertEqual((d['name'], d['scope']), ('Award bot: CI', 'award'))
        self.assertEqual(d['createdBy'], self.w['owner'].address)
        self.assertRegex(d['createdAt'], r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$')
        rec = self.records(eid)
        self.assertEqual(set(rec), {d['id']})
        scope, creator, ms, h, name = rec[d['id']].split(':', 4)
        self.assertEqual((scope, creator, name), ('award', self.w['owner'].address,
                                                  'Award bot: CI'))
        self.assertEqual(h, keccak256(d['key'].encode()).hex())
        self.assertEqual(harness.iso_ms(int(ms)), d['createdAt'])
        self.assertNotIn(d['key'][3:], repr(self.r.cli('DUMP', 'ent:{%s}:apikeys' % eid)))
        # Two keys of one entity differ; an admin key too.
        d2 = self.create(eid, name='admin bot', scope='admin')
        self.assertNotEqual(d2['key'], d['key'])
        self.assertEqual(self.records(eid)[d2['id']].split(':')[0], 'admin')

    def test_name_and_scope_validated(self):
        eid = self.entity()
        path = '/api/entities/%s/api-keys' % eid
        for body, field in (({'scope': 'award'}, 'name'),
                            ({'name': '', 'scope': 'award'}, 'name'),
                            ({'name': '   ', 'scope': 'award'}, 'name'),
                            ({'name': 'x' * 101, 'scope': 'award'}, 'name'),
                            ({'name': 'bad\x01name', 'scope': 'award'}, 'name'),
                            ({'name': 7, 'scope': 'award'}, 'name'),
                            ({'name': 'ok'}, 'scope'),
                            ({'name': 'ok', 'scope': 'owner'}, 'scope'),
                            ({'name': 'ok', 'scope': 'Award'}, 'scope'),
                            ({'name': 'ok', 'scope': ''}, 'scope'),
                            ({'name': 'ok', 'scope': 1}, 'scope')):
            with self.subTest(body=body):
                self.assertEnvelope(self.call('owner', 'POST', path, body), 400,
                                    'invalid_request', field)
        st, _, b = self.call('owner', 'POST', path, None)
        self.assertEqual(st, 400, b)
        self.assertEqual(self.records(eid), {})
        # The bounds themselves pass: 100 characters (not bytes), and one.
        self.assertEqual(self.create(eid, name='\u00e9' * 100)['name'], '\u00e9' * 100)
        self.create(eid, name='x', scope='admin')

    def test_only_owners_and_platform_admins(self):
        eid = self.entity()
        kept = self.create(eid)
        base = '/api/entities/%s/api-keys' % eid
        for who in ('admin', 'member', 'stranger'):
            with self.subTest(who=who):
                self.assertEnvelope(self.call(who, 'POST', base, {'name': 'n', 'scope': 'award'}),
                                    403, 'forbidden')
                self.assertEnvelope(self.call(who, 'GET', base), 403, 'forbidden')
                self.assertEnvelope(self.call(who, 'DELETE', base + '/' + kept['id']), 403,
                                    'forbidden')
        self.assertEqual(set(self.records(eid)), {kept['id']})
        # Unsigned: 401 (signature missing), as every signed route.
        st, _, b = harness.request(self.svc.port, 'GET', base + '?address=' +
                                   self.w['owner'].address)
        self.assertEqual(st, 401, b)
        # A platform admin acts as an owner; the record names it.
        d = self.create(eid, who='platform', scope='admin')
        self.assertEqual(d['createdBy'], self.w['platform'].address)
        st, _, b = self.call('platform', 'GET', base)
        self.assertEqual((st, len(b['data'])), (200, 2), b)
        st, _, b = self.call('platform', 'DELETE', base + '/' + d['id'])
        self.assertEqual(st, 200, b)

    def test_unknown_and_disabled_entity(self):
        missing = 'c-' + str(uuid.uuid4())
        base = '/api/entities/%s/api-keys' % missing
        self.assertEnvelope(self.call('owner', 'POST', base, {'name': 'n', 'scope': 'award'}),
                            404, 'not_found')
        self.assertEnvelope(self.call('owner', 'GET', base), 404, 'not_found')
        self.assertEnvelope(self.call('owner', 'DELETE', base + '/' + '0' * 24), 404,
                            'not_found')
        self.assertEnvelope(self.call('owner', 'GET', '/api/entities/nope/api-keys'), 404,
                            'not_found')
        self.assertEqual(self.r.cli('EXISTS', 'ent:{%s}:apikeys' % missing), 0)
        # A disabled entity: its owners' writes are refused (403) as every owner write; they
        # still see its keys; others see no entity.
        eid = self.entity()
        kept = self.create(eid)
        st, _, b = self.call('platform', 'POST', '/api/entities', {
            'id': eid, 'name': 'Keys Guild', 'description': '', 'isEnabled': False,
            'twitter': '', 'discord': '', 'website': '', 'imageUrl': '',
            'ownerAddresses': [self.w['owner'].address]})
        self.assertEqual(st, 200, b)
        base = '/api/entities/%s/api-keys' % eid
        self.assertEnvelope(self.call('owner', 'POST', base, {'name': 'n', 'scope': 'award'}),
                            403, 'forbidden')
        self.assertEnvelope(self.call('owner', 'DELETE', base + '/' + kept['id']), 403,
                            'forbidden')
        st, _, b = self.call('owner', 'GET', base)
        self.assertEqual((st, [k['id'] for k in b['data']]), (200, [kept['id']]), b)
        self.assertEnvelope(self.call('admin', 'GET', base), 404, 'not_found')

    def test_at_most_twenty(self):
        eid = self.entity()
        made = [self.create(eid, name='bot %d' % i, scope=('award', 'admin')[i % 2])
                for i in range(20)]
        # used keys keep their u:<id> fields beside the records; they do not count
        self.r.cli('HSET', 'ent:{%s}:apikeys' % eid, 'u:' + made[0]['id'], '1700000000000')
        b = self.create(eid, name='one too many', status=409)
        self.assertEqual(b['error']['code'], 'conflict', b)
        self.assertIn('20', b['error']['message'])
        self.assertEqual(len([f for f in self.records(eid) if not f.startswith('u:')]), 20)
        st, _, b = self.call('owner', 'DELETE', '/api/entities/%s/api-keys/%s' %
                             (eid, made[5]['id']))
        self.assertEqual(st, 200, b)
        self.create(eid, name='room again')
        self.create(eid, name='full again', status=409)

    def test_list_without_keys(self):
        eid = self.entity()
        base = '/api/entities/%s/api-keys' % eid
        st, _, b = self.call('owner', 'GET', base)
        self.assertEqual((st, b), (200, {'success': True, 'data': []}))
        a = self.create(eid, name='first: with colons', scope='award')
        c = self.create(eid, name='second', scope='admin', who='platform')
        st, _, b = self.call('owner', 'GET', base)
        self.assertEqual(st, 200, b)
        # Oldest first; two made in the same millisecond by their ids.
        oldest_first = sorted((a, c), key=lambda k: (k['createdAt'], k['id']))
        self.assertEqual([k['id'] for k in b['data']], [k['id'] for k in oldest_first])
        for item, made in zip(b['data'], oldest_first):
            self.assertEqual(set(item), {'id', 'name', 'scope', 'createdAt', 'createdBy',
                                         'lastUsedAt'})
            for f in ('id', 'name', 'scope', 'createdAt', 'createdBy'):
                self.assertEqual(item[f], made[f])
            self.assertIsNone(item['lastUsedAt'])
        text = repr(b)
        for made in (a, c):
            self.assertNotIn(made['key'][3:], text)
            self.assertNotIn(keccak256(made['key'].encode()).hex(), text)
        # A use recorded (to the minute) shows as lastUsedAt.
        self.r.cli('HSET', 'ent:{%s}:apikeys' % eid, 'u:' + a['id'], '1700000040000')
        st, _, b = self.call('owner', 'GET', base)
        used = {k['id']: k['lastUsedAt'] for k in b['data']}
        self.assertEqual(used, {a['id']: '2023-11-14T22:14:00.000Z', c['id']: None})

    def test_delete_then_404(self):
        eid = self.entity()
        a, c = self.create(eid), self.create(eid, name='stays')
        hkey = 'ent:{%s}:apikeys' % eid
        self.r.cli('HSET', hkey, 'u:' + a['id'], '1700000040000')
        path = '/api/entities/%s/api-keys/%s' % (eid, a['id'])
        st, _, b = self.call('owner', 'DELETE', path)
        self.assertEqual((st, b), (200, {'success': True, 'deleted': True}))
        self.assertEqual(set(self.records(eid)), {c['id']})  # record and lastUsedAt gone
        self.assertEnvelope(self.call('owner', 'DELETE', path), 404, 'not_found')
        for bad in ('X' * 24, a['id'][:23], a['id'] + '0', a['id'].upper()):
            self.assertEnvelope(self.call('owner', 'DELETE', '/api/entities/%s/api-keys/%s' %
                                          (eid, bad)), 404, 'not_found')
        st, _, b = self.call('owner', 'GET', '/api/entities/%s/api-keys' % eid)
        self.assertEqual([k['id'] for k in b['data']], [c['id']])

    def test_events_name_the_key_never_the_key(self):
        eid = self.entity()
        d = self.create(eid, name='evented', scope='admin')
        st, _, b = self.call('owner', 'DELETE', '/api/entities/%s/api-keys/%s' % (eid, d['id']))
        self.assertEqual(st, 200, b)
        made, ended = self.events(eid, 'apiKey.created'), self.events(eid, 'apiKey.deleted')
        self.assertEqual(len(made), 1, made)
        self.assertEqual(len(ended), 1, ended)
        for e in (made[0], ended[0]):
            self.assertEqual(e['actor'], self.w['owner'].address)
            self.assertEqual(e['data'], {'id': d['id'], 'name': 'evented', 'scope': 'admin'})
        raw = repr(self.r.cli('XRANGE', 'ent:{%s}:events' % eid, '-', '+'))
        self.assertNotIn(d['key'][3:], raw)
        self.assertNotIn(keccak256(d['key'].encode()).hex(), raw)
        # A refused create writes no event.
        self.create(eid, who='admin', status=403)
        self.assertEqual(len(self.events(eid, 'apiKey.created')), 1)

    def test_writes_spend_the_write_budget(self):
        # An owner of its own (limits are per address and kept in Redis): its writes on the
        # tight instance are the first it makes.
        eid = self.entity(owners=('owner', 'budget'))
        base = '/api/entities/%s/api-keys' % eid
        made = self.create(eid, who='budget', svc=self.tight)
        statuses = []
        for i in range(8):
            st, _, b = self.call('budget', 'POST', base, {'name': 'b%d' % i, 'scope': 'award'},
                                 svc=self.tight)
            if st == 201:
                KEYS.add(b['data']['key'])
            statuses.append(st)
            if st == 429:
                self.assertEqual(b['error']['code'], 'rate_limited', b)
                break
        self.assertEqual(statuses[-1], 429, statuses)
        # A delete spends it as well; a read does not.
        self.assertEnvelope(self.call('budget', 'DELETE', base + '/' + made['id'],
                                      svc=self.tight), 429, 'rate_limited')
        st, _, b = self.call('budget', 'GET', base, svc=self.tight)
        self.assertEqual(st, 200, b)

    def test_erasure_takes_the_keys(self):
        eid = self.entity()
        self.create(eid)
        hkey = 'ent:{%s}:apikeys' % eid
        self.assertEqual(self.r.cli('EXISTS', hkey), 1)
        st, _, b = self.call('owner', 'DELETE', '/api/entities/%s' % eid)
        self.assertEqual(st, 200, b)
        harness.wait_for(lambda: self.r.cli('EXISTS', hkey) == 0, scaled(30), interval=0.1,
                         what='the erasure of the keys')


if __name__ == '__main__':
    harness.main()
