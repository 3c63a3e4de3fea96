"""Entity API: get, create/update, members (users, force-add), admins; roles, the read rule,
disabled entities, __v compare-and-set, community aliases, pagination, atomicity under SIGKILL,
concurrency and the number of Redis commands each request costs."""

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import FaultProxy, scaled  # noqa: E402

# Exactly the fields of an Entity in a response: the seed's (CONTRACT §3.1). The creator is
# stored (STORED_FIELDS) but never returned.
ENTITY_FIELDS = {
    'id', 'name', 'description', 'ownerAddress', 'contracts', 'twitter', 'discord', 'website',
    'telegram', 'instagram', 'openseaSlug', 'imageURL', 'bannerURL', 'defaultDyNftThemeId',
    'communityURLAlias', 'public', 'isEnabled', 'createdAt', 'modifiedAt', '__v',
}
STRING_FIELDS = ('name', 'description', 'twitter', 'discord', 'website', 'telegram', 'instagram',
                 'openseaSlug', 'imageURL', 'bannerURL', 'defaultDyNftThemeId',
                 'communityURLAlias')
# The fields every entity hash in Redis holds (service/redis/keys.h); the service may keep more (such
# as a rendering of the entity's JSON, checked against the rest when present).
STORED_FIELDS = {
    'id', 'name', 'description', 'twitter', 'discord', 'website', 'imageURL', 'telegram',
    'instagram', 'openseaSlug', 'defaultDyNftThemeId', 'bannerURL', 'contracts',
    'communityURLAlias', 'public', 'isEnabled', '__v', 'createdAt', 'createdBy', 'modifiedAt',
}
USER_FIELDS = {'address', 'chain', 'addedAt', 'addedBy', 'via'}
REQUIRED_BODY_FIELDS = ('name', 'description', 'ownerAddresses', 'twitter', 'discord', 'website',
                        'imageUrl')

ISO_RE = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$')
ENTITY_ID_RE = re.compile(
    r'^c-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')
ENTITY_KEY_RE = re.compile(r'^ent:\{(c-[0-9a-f-]{36})\}$')
ADDR_RE = re.compile(r'^0x[0-9a-f]{40}$')
ANY = object()  # "field: whatever the service says" in assertError


def rand_addr():
    return '0x' + os.urandom(20).hex()


def rand_tag(n=8):
    return uuid.uuid4().hex[:n]


def new_entity_id():
    return 'c-' + str(uuid.uuid4())


# --------------------------------------------------------------------------------------------
# signing: many wallets in one entityd-sign run

class Caller:
    """A wallet with its signature over the current sign-in message."""

    def __init__(self, wallet, signature, role):
        self.wallet = wallet
        self.address = wallet.address
        self.signature = signature
        self.role = role

    @property
    def q(self):
        """address and signature query parameters."""
        return 'address=%s&signature=%s' % (self.address, self.signature)

    @property
    def aq(self):
        """address only (not signed in)."""
        return 'address=%s' % self.address

    def __repr__(self):
        return '<%s %s>' % (self.role, self.address)


def sign_wallets(wallets, message):
    """{address: signature} for every wallet, from one entityd-sign --key-file run."""
    d = harness.tmpdir('keys-')
    path = os.path.join(d, 'keys')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write(''.join(w.key + '\n' for w in wallets))
    env = dict(os.environ)
    env.pop('ENTITYD_SIGN_KEY', None)
    p = subprocess.run([harness.ENTITYD_SIGN_BIN, '--key-file', path, '--message', '-'],
                       input=message.encode(), env=env, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError('entityd-sign failed: %s' % p.stderr.decode(errors='replace'))
    lines = [l for l in p.stdout.decode().splitlines() if l.strip()]
    assert len(lines) == len(wallets), lines
    out = {}
    for w, line in zip(wallets, lines):
        fields = dict(kv.split('=', 1) for kv in line.strip().split('&'))
        assert fields['address'] == w.address, (fields, w.address)
        harness.ISSUED_SIGNATURES.add(fields['signature'].lower()[2:])
        out[w.address] = fields['signature']
    return out


def make_callers(port, roles):
    """{role: Caller} with a fresh random wallet per role, all signed in one run."""
    wallets = harness.Wallet.random(len(roles))
    message, _ = harness.current_message(port)
    sigs = sign_wallets(wallets, message)
    return {role: Caller(w, sigs[w.address], role) for role, w in zip(roles, wallets)}


# --------------------------------------------------------------------------------------------
# Redis inspection

def decode(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [decode(x) for x in v]
    return v


def rcli(r, *args):
    return decode(r.cli(*args, timeout=scaled(10)))


def scan_keys(r, pattern):
    keys, cursor = [], '0'
    while True:
        cursor, batch = rcli(r, 'SCAN', cursor, 'MATCH', pattern, 'COUNT', '1000')
        keys.extend(batch)
        if cursor == '0':
            return sorted(set(keys))


def entity_ids(r):
    out = set()
    for k in scan_keys(r, 'ent:{c-*}'):
        m = ENTITY_KEY_RE.match(k)
        if m:
            out.add(m.group(1))
    return out


def hgetall(r, key):
    flat = rcli(r, 'HGETALL', key)
    return dict(zip(flat[0::2], flat[1::2]))


def ekey(eid, suffix=''):
    return 'ent:{%s}%s' % (eid, suffix)


def alias_key(alias):
    return 'alias:{%s}' % alias


def alias_holder(redis, alias):
    """The entity id an alias key names: the key holds "<entity id> <claimed at>" (the claim
    time lets other instances tell an in-progress claim from one a failed write left behind)."""
    value = rcli(redis, 'GET', alias_key(alias))
    return value.split(' ')[0] if isinstance(value, str) else value


def commandstats(r):
    """{command: calls} from INFO commandstats."""
    return harness.commandstats(rcli(r, 'INFO', 'commandstats'))


def stats_delta(before, after):
    """Commands Redis ran in between, but for INFO itself and PUBLISH: every entityd with the
    read cache on publishes a heartbeat once a second, whatever the requests."""
    keys = set(before) | set(after)
    d = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
    return {k: v for k, v in d.items() if v and k not in ('info', 'publish')}


def wait_redis_quiet(r, what):
    """Until Redis ran no command between two looks 0.2 s apart: the index writes a write sends
    after its answer (CONTRACT section 9) have landed, and will not count in the next read."""
    harness.wait_still(lambda: commandstats(r), stats_delta, what)


def parse_member_record(rec):
    """(addedAt ISO, chain, addedBy) of a :members hash value: a member entry,
    "<addedAt ms, 16 digits>:<address>:<addedBy>:<chain>", or the first format's
    "<addedAt>:<address>:<member JSON>"."""
    added, _, rest = rec[:16], rec[17:59], rec[60:]
    assert added.isdigit() and rec[16] == ':' and rec[59] == ':', rec
    if rest.startswith('{'):
        j = json.loads(rest)
        return j['addedAt'], j['chain'], j['addedBy']
    by, chain = rest.split(':')
    assert ADDR_RE.match(by), rec
    return harness.iso_ms(int(added)), chain, by


def members_state(r, eid):
    """(records {address: (addedAt ISO, chain, addedBy)}, order entries [(addedAt ISO,
    address)]). Order entries start "<addedAt ms, 16 digits>:<address>" (anything may follow)."""
    flat = rcli(r, 'HGETALL', ekey(eid, ':members'))
    records = {}
    for a, rec in zip(flat[0::2], flat[1::2]):
        records[a] = parse_member_record(rec)
    order = []
    for e in rcli(r, 'ZRANGE', ekey(eid, ':members:order'), '0', '-1'):
        assert e[16] == ':' and ADDR_RE.match(e[17:59]), e
        order.append((harness.iso_ms(int(e[:16])), e[17:59]))
    return records, order


def check_stored_entity(stored):
    """Problems with one entity hash: missing fields, or a stored JSON rendering that
    disagrees with the fields."""
    problems = []
    missing = STORED_FIELDS - set(stored)
    if missing:
        problems.append('fields missing: %s' % sorted(missing))
    if 'json' in stored:
        try:
            j = json.loads(stored['json'])
        except ValueError:
            return problems + ['json field is not JSON']
        if 'createdBy' in j:
            problems.append('json field carries createdBy')
        for f in ('id', 'name', 'communityURLAlias'):
            if j.get(f) != stored.get(f):
                problems.append('json %s %r vs field %r' % (f, j.get(f), stored.get(f)))
        if str(j.get('__v')) != stored.get('__v'):
            problems.append('json __v %r vs field %r' % (j.get('__v'), stored.get('__v')))
    return problems


# --------------------------------------------------------------------------------------------
# concurrency

def run_parallel(fns, timeout):
    """Runs every fn in its own thread, released together; returns their results in order
    (an exception raised by a fn is returned as its result)."""
    barrier = threading.Barrier(len(fns))
    results = [None] * len(fns)

    def wrap(i, fn):
        try:
            barrier.wait(timeout)
            results[i] = fn()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            results[i] = e

    threads = [threading.Thread(target=wrap, args=(i, fn), daemon=True)
               for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
    alive = [t for t in threads if t.is_alive()]
    assert not alive, '%d threads still running after %.0fs' % (len(alive), timeout)
    return results


# --------------------------------------------------------------------------------------------
# shared helpers for the test classes

class EntityCase(harness.ServiceTestCase):
    port = None
    r = None

    # --- HTTP ---

    def req(self, method, path, body=None, port=None, headers=None):
        return harness.request(port or self.port, method, path, body=body, headers=headers,
                               timeout=scaled(15))

    def body(self, owners, **kw):
        b = {
            'name': 'Entity ' + rand_tag(),
            'description': 'A test entity.\nSecond line.',
            'ownerAddresses': list(owners),
            'twitter': '@ent',
            'discord': 'ent#1',
            'website': 'https://example.org',
            'imageUrl': 'https://example.org/i.png',
        }
        for k, v in kw.items():
            if v is _DROP:
                b.pop(k, None)
            else:
                b[k] = v
        return b

    def post_entity(self, caller, body, query='', port=None):
        q = caller.q if isinstance(caller, Caller) else caller
        return self.req('POST', '/api/entities?%s%s' % (q, query), body, port=port)

    def create(self, caller, owners=(), port=None, **kw):
        owners = list(owners) or [caller.address]
        resp = self.post_entity(caller, self.body(owners, **kw), port=port)
        body = self.assertOk(resp, 201)
        self.assertEntityShape(body['data'])
        return body['data']

    def update(self, caller, eid, owners, port=None, **kw):
        return self.post_entity(caller, self.body(owners, id=eid, **kw), port=port)

    def get_entity(self, eid, caller, signed=True, port=None):
        return self.req('GET', '/api/entities/%s?%s' % (eid, caller.q if signed else caller.aq),
                        port=port)

    def users(self, eid, caller, signed=True, extra='', port=None):
        return self.req('GET', '/api/entities/%s/users?%s%s' %
                        (eid, caller.q if signed else caller.aq, extra), port=port)

    def force_add(self, eid, caller, addresses, chain='ETH', signed=True, key='Chain', port=None):
        body = {'addresses': addresses}
        if chain is not None:
            body[key] = chain
        return self.req('POST', '/api/entities/%s/force-add?%s' %
                        (eid, caller.q if signed else caller.aq), body, port=port)

    def admins_get(self, eid, caller, signed=True):
        return self.req('GET', '/api/entities/%s/admins?%s' %
                        (eid, caller.q if signed else caller.aq))

    def admins_post(self, eid, caller, addresses, signed=True):
        return self.req('POST', '/api/entities/%s/admins?%s' %
                        (eid, caller.q if signed else caller.aq), {'addresses': addresses})

    def admins_delete(self, eid, caller, address, signed=True):
        return self.req('DELETE', '/api/entities/%s/admins/%s?%s' %
                        (eid, address, caller.q if signed else caller.aq))

    def all_users(self, eid, caller, limit):
        """Every member through the cursor chain; returns (users, pages)."""
        users, pages, cursor = [], 0, None
        while True:
            extra = '&limit=%d' % limit + ('&cursor=%s' % cursor if cursor else '')
            body = self.assertOk(self.users(eid, caller, extra=extra))
            self.assertUsersShape(body)
            self.assertLessEqual(len(body['users']), limit)
            users += body['users']
            pages += 1
            cursor = body['nextCursor']
            if cursor is None:
                return users, pages
            self.assertEqual(len(body['users']), limit, 'a short page with a nextCursor')
            self.assertLess(pages, 10000)

    # --- assertions ---

    def assertError(self, resp, status, code, field=ANY):
        st, headers, body = resp
        self.assertEqual(st, status, 'status %s, body %r' % (st, body))
        self.assertIsInstance(body, dict, body)
        self.assertIs(body.get('success'), False, body)
        self.assertEqual(set(body), {'success', 'error'}, body)
        err = body['error']
        self.assertEqual(err.get('code'), code, body)
        self.assertTrue(isinstance(err.get('message'), str) and err['message'], body)
        self.assertLessEqual(set(err), {'code', 'message', 'field'}, body)
        if field is not ANY:
            if field is None:
                self.assertNotIn('field', err, body)
            else:
                self.assertEqual(err.get('field'), field, body)
        return err

    def assertEntityShape(self, ent):
        self.assertEqual(set(ent), ENTITY_FIELDS, ent)
        self.assertRegex(ent['id'], ENTITY_ID_RE)
        for f in STRING_FIELDS:
            self.assertIsInstance(ent[f], str, f)
        self.assertIsInstance(ent['ownerAddress'], list)
        self.assertTrue(ent['ownerAddress'])
        for a in ent['ownerAddress'] + ent['contracts']:
            self.assertRegex(a, ADDR_RE)
        self.assertEqual(ent['ownerAddress'], sorted(ent['ownerAddress']))
        self.assertEqual(len(set(ent['ownerAddress'])), len(ent['ownerAddress']))
        self.assertIsInstance(ent['contracts'], list)
        self.assertIsInstance(ent['public'], bool)
        self.assertIsInstance(ent['isEnabled'], bool)
        self.assertRegex(ent['createdAt'], ISO_RE)
        self.assertRegex(ent['modifiedAt'], ISO_RE)
        self.assertTrue(type(ent['__v']) is int and ent['__v'] >= 0, ent['__v'])

    def assertUsersShape(self, body):
        self.assertEqual(set(body), {'success', 'users', 'nextCursor'}, body)
        self.assertTrue(body['nextCursor'] is None or isinstance(body['nextCursor'], str))
        for u in body['users']:
            self.assertEqual(set(u), USER_FIELDS, u)
            self.assertRegex(u['address'], ADDR_RE)
            self.assertRegex(u['addedBy'], ADDR_RE)
            self.assertRegex(u['addedAt'], ISO_RE)
            self.assertIsInstance(u['chain'], str)

    def assertAdmins(self, resp, expected):
        body = self.assertOk(resp)
        self.assertEqual(set(body), {'success', 'admins'}, body)
        self.assertEqual(body['admins'], sorted(a.lower() for a in expected))


_DROP = object()  # body(..., field=_DROP) leaves a field out


# --------------------------------------------------------------------------------------------

class EntityApiTest(EntityCase):
    """One Redis and one entityd (with a platform admin) shared by the class."""

    ROLES = ('owner', 'owner2', 'admin', 'member', 'stranger', 'platform', 'other')

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        # Wallets first (their addresses go into PLATFORM_ADMINS); sign once the service runs.
        wallets = harness.Wallet.random(len(cls.ROLES))
        cls.svc = cls.class_entityd(redis=cls.r,
                                    env={'PLATFORM_ADMINS': wallets[cls.ROLES.index('platform')]
                                         .address.upper().replace('0X', '0x')})
        cls.port = cls.svc.port
        message, _ = harness.current_message(cls.port)
        sigs = sign_wallets(wallets, message)
        cls.c = {role: Caller(w, sigs[w.address], role) for role, w in zip(cls.ROLES, wallets)}

    def test_entity_has_exactly_the_seed_fields(self):
        # Create, update and read (signed, unsigned, private with a role lookup) all answer an
        # Entity with the seed's fields and nothing else: no createdBy, no stored bookkeeping.
        c = self.c
        ent = self.create(c['owner'], communityURLAlias='keys-' + rand_tag())
        self.assertEqual(set(ent), ENTITY_FIELDS)
        up = self.assertOk(self.update(c['owner'], ent['id'], [c['owner'].address],
                                       name='Keys', communityURLAlias='keys-' + rand_tag()))
        self.assertEqual(set(up['data']), ENTITY_FIELDS)
        for who, signed in ((c['owner'], True), (c['stranger'], True), (c['stranger'], False)):
            got = self.assertOk(self.get_entity(ent['id'], who, signed=signed))['data']
            self.assertEqual(set(got), ENTITY_FIELDS)
        self.assertOk(self.update(c['owner'], ent['id'], [c['owner'].address], public=False))
        got = self.assertOk(self.get_entity(ent['id'], c['owner']))['data']
        self.assertEqual(set(got), ENTITY_FIELDS)
        self.assertEqual(hgetall(self.r, ekey(ent['id']))['createdBy'], c['owner'].address)
        # A record rendered by an earlier release names its creator before "__v": cut on reads.
        stored = json.loads(rcli(self.r, 'HGET', ekey(ent['id']), 'json'))
        v = stored.pop('__v')
        legacy = dict(stored, name='Legacy', createdBy=c['owner'].address, __v=v)
        rcli(self.r, 'HSET', ekey(ent['id']), 'json', json.dumps(legacy, separators=(',', ':')))
        harness.wait_for(lambda: self.get_entity(ent['id'], c['owner'])[2]['data']['name'] ==
                         'Legacy', scaled(5), what='the legacy record read')
        got = self.assertOk(self.get_entity(ent['id'], c['owner']))['data']
        self.assertEqual(got, {k: x for k, x in legacy.items() if k != 'createdBy'})

    def fresh(self, public=True, alias=None):
        """An entity of owner and owner2, with admin as admin and member as member."""
        c = self.c
        kw = {'public': public}
        if alias is not None:
            kw['communityURLAlias'] = alias
        ent = self.create(c['owner'], owners=[c['owner'].address, c['owner2'].address], **kw)
        eid = ent['id']
        self.assertAdmins(self.admins_post(eid, c['owner'], [c['admin'].address]),
                          [c['admin'].address])
        body = self.assertOk(self.force_add(eid, c['owner'], [c['member'].address]))
        self.assertEqual(body['added'], 1)
        return eid

    def owners(self):
        return [self.c['owner'].address, self.c['owner2'].address]

    # --- create ---

    def test_create_success_shape_and_defaults(self):
        c = self.c
        before = entity_ids(self.r)
        t0 = int(time.time() * 1000)
        other = rand_addr()
        resp = self.post_entity(c['stranger'], self.body([other], name='  Padded name  '))
        ent = self.assertOk(resp, 201)['data']
        self.assertEqual(set(self.assertOk(resp, 201)), {'success', 'data'})
        self.assertEntityShape(ent)
        # The creator joins the owners.
        self.assertEqual(ent['ownerAddress'], sorted([other, c['stranger'].address]))
        self.assertEqual(ent['name'], 'Padded name')
        self.assertEqual(ent['description'], 'A test entity.\nSecond line.')
        self.assertEqual(ent['imageURL'], 'https://example.org/i.png')
        self.assertEqual(ent['website'], 'https://example.org')
        for f in ('telegram', 'instagram', 'openseaSlug', 'bannerURL', 'defaultDyNftThemeId',
                  'communityURLAlias'):
            self.assertEqual(ent[f], '', f)
        self.assertEqual(ent['contracts'], [])
        self.assertIs(ent['public'], True)
        self.assertIs(ent['isEnabled'], True)
        self.assertEqual(ent['__v'], 0)
        self.assertEqual(hgetall(self.r, ekey(ent['id']))['createdBy'], c['stranger'].address)
        self.assertEqual(ent['createdAt'], ent['modifiedAt'])
        self.assertGreaterEqual(ent['createdAt'], harness.iso_ms(t0 - 5000))
        self.assertLessEqual(ent['createdAt'], harness.iso_ms(int(time.time() * 1000) + 5000))
        # Stored as documented.
        self.assertEqual(entity_ids(self.r) - before, {ent['id']})
        stored = hgetall(self.r, ekey(ent['id']))
        self.assertEqual(check_stored_entity(stored), [])
        self.assertEqual(stored['__v'], '0')
        if 'json' in stored:
            self.assertEqual(json.loads(stored['json']), ent)
        self.assertEqual(sorted(rcli(self.r, 'SMEMBERS', ekey(ent['id'], ':owners'))),
                         ent['ownerAddress'])
        # The same entity reads back, unsigned (public) and signed.
        got = self.assertOk(self.get_entity(ent['id'], c['other'], signed=False))
        self.assertEqual(set(got), {'success', 'data'})
        self.assertEqual(got['data'], ent)
        self.assertEqual(self.assertOk(self.get_entity(ent['id'], c['other']))['data'], ent)

    def test_create_with_every_optional_field(self):
        c = self.c
        o1, o2 = rand_addr(), rand_addr()
        k1, k2, k3 = rand_addr(), rand_addr(), rand_addr()
        alias = 'opt-' + rand_tag()
        ent = self.create(
            c['owner'],
            # EIP-55 and all-uppercase spellings are stored lowercase; duplicates once.
            owners=[harness.eip55(o1), '0x' + o2[2:].upper(), o1, c['owner'].address],
            contracts=[harness.eip55(k1), k2], openseaSlug='slug', telegram='tg',
            instagram='ig', defaultDyNftThemeId='theme-1', bannerUrl='http://example.org/b.png',
            communityURLAlias=alias, public=False)
        self.assertEqual(ent['ownerAddress'], sorted([o1, o2, c['owner'].address]))
        self.assertEqual(ent['contracts'], [k1, k2])
        self.assertEqual((ent['openseaSlug'], ent['telegram'], ent['instagram'],
                          ent['defaultDyNftThemeId'], ent['bannerURL'], ent['communityURLAlias'],
                          ent['public']),
                         ('slug', 'tg', 'ig', 'theme-1', 'http://example.org/b.png', alias, False))
        self.assertEqual(alias_holder(self.r, alias), ent['id'])
        # contracts as one comma-separated string.
        ent2 = self.create(c['owner'], contracts='%s, %s' % (harness.eip55(k3), k1))
        self.assertEqual(ent2['contracts'], [k3, k1])
        ent3 = self.create(c['owner'], contracts='')
        self.assertEqual(ent3['contracts'], [])

    def test_create_missing_required_field_is_400_naming_it(self):
        c = self.c
        before = entity_ids(self.r)
        for f in REQUIRED_BODY_FIELDS:
            with self.subTest(field=f):
                resp = self.post_entity(c['owner'], self.body([c['owner'].address], **{f: _DROP}))
                self.assertError(resp, 400, 'invalid_request', f)
        self.assertEqual(entity_ids(self.r), before, 'a refused create stored an entity')

    def bad_values(self):
        """(field, value, expected error field) for create and update bodies."""
        a = rand_addr()
        mixed_bad = harness.eip55(a)
        mixed_bad = mixed_bad[:2] + mixed_bad[2:].swapcase()  # wrong checksum, still mixed
        if mixed_bad[2:].lower() == mixed_bad[2:] or mixed_bad[2:].upper() == mixed_bad[2:]:
            mixed_bad = None
        rows = [
            ('name', 5, 'name'), ('name', None, 'name'), ('name', ['x'], 'name'),
            ('name', '   ', 'name'), ('name', 'x' * 101, 'name'), ('name', 'a\x01b', 'name'),
            ('description', 5, 'description'), ('description', {}, 'description'),
            ('description', 'd' * 5001, 'description'),
            ('ownerAddresses', 'not-a-list', 'ownerAddresses'),
            ('ownerAddresses', a, 'ownerAddresses'),
            ('ownerAddresses', {}, 'ownerAddresses'), ('ownerAddresses', 5, 'ownerAddresses'),
            ('ownerAddresses', [], 'ownerAddresses'),
            ('ownerAddresses', [5], 'ownerAddresses[0]'),
            ('ownerAddresses', [a, '0x123'], 'ownerAddresses[1]'),
            ('ownerAddresses', [rand_addr() for _ in range(51)], 'ownerAddresses'),
            ('twitter', 5, 'twitter'), ('twitter', 'x' * 201, 'twitter'),
            ('discord', True, 'discord'), ('discord', None, 'discord'),
            ('website', 1, 'website'), ('website', 'ftp://example.org', 'website'),
            ('website', 'example.org', 'website'),
            ('imageUrl', {}, 'imageUrl'), ('imageUrl', 'not a url', 'imageUrl'),
            ('contracts', 5, 'contracts'), ('contracts', {}, 'contracts'),
            ('contracts', [5], 'contracts[0]'), ('contracts', [a, 'nope'], 'contracts[1]'),
            ('contracts', 'nope', 'contracts[0]'), ('contracts', '%s,0x12' % a, 'contracts[1]'),
            ('openseaSlug', 1, 'openseaSlug'), ('telegram', [], 'telegram'),
            ('instagram', False, 'instagram'), ('defaultDyNftThemeId', 7,
                                                'defaultDyNftThemeId'),
            ('bannerUrl', 1, 'bannerUrl'), ('bannerUrl', 'javascript:x', 'bannerUrl'),
            ('communityURLAlias', 1, 'communityURLAlias'),
            ('communityURLAlias', 'ab', 'communityURLAlias'),
            ('communityURLAlias', 'Upper-Case', 'communityURLAlias'),
            ('communityURLAlias', 'under_score', 'communityURLAlias'),
            ('communityURLAlias', 'x' * 65, 'communityURLAlias'),
            ('public', 'true', 'public'), ('public', 1, 'public'), ('public', None, 'public'),
            ('isEnabled', 'yes', 'isEnabled'), ('isEnabled', 0, 'isEnabled'),
            ('__v', '0', '__v'), ('__v', -1, '__v'), ('__v', 1.5, '__v'),
            ('id', 5, 'id'), ('id', 'c-not-an-id', 'id'), ('id', new_entity_id().upper(), 'id'),
        ]
        if mixed_bad:
            rows.append(('ownerAddresses', [mixed_bad], 'ownerAddresses[0]'))
        return rows

    def test_create_wrong_type_or_value_is_400_naming_the_field(self):
        c = self.c
        before = entity_ids(self.r)
        for f, v, field in self.bad_values():
            with self.subTest(field=f, value=repr(v)[:40]):
                resp = self.post_entity(c['owner'], self.body([c['owner'].address], **{f: v}))
                self.assertError(resp, 400, 'invalid_request', field)
        self.assertEqual(entity_ids(self.r), before, 'a refused create stored an entity')
        # Not JSON, not an object.
        for raw in (b'{', b'[]', b'"x"', b'\xff\xfe'):
            with self.subTest(raw=raw):
                st, h, body = self.req('POST', '/api/entities?' + c['owner'].q, raw,
                                       headers={'Content-Type': 'application/json'})
                self.assertError((st, h, body), 400, 'invalid_json')

    def test_update_missing_or_bad_field_is_400_and_changes_nothing(self):
        c = self.c
        eid = self.fresh()
        stored = hgetall(self.r, ekey(eid))
        for f in REQUIRED_BODY_FIELDS:
            with self.subTest(missing=f):
                self.assertError(self.update(c['owner'], eid, self.owners(), **{f: _DROP}),
                                 400, 'invalid_request', f)
        for f, v, field in self.bad_values():
            if f == 'id':
                continue
            with self.subTest(field=f, value=repr(v)[:40]):
                self.assertError(self.update(c['owner'], eid, self.owners(), **{f: v}),
                                 400, 'invalid_request', field)
        self.assertEqual(hgetall(self.r, ekey(eid)), stored)

    # --- update ---

    def test_update_success_keeps_left_out_optional_fields(self):
        c = self.c
        ent = self.create(c['owner'], owners=self.owners(), telegram='tg1',
                          bannerUrl='https://b.example/x', contracts=[rand_addr()], public=False)
        eid = ent['id']
        time.sleep(0.005)
        resp = self.update(c['owner'], eid, self.owners(), name='Renamed', twitter='@new')
        body = self.assertOk(resp, 200)
        self.assertEqual(set(body), {'success', 'data'})
        up = body['data']
        self.assertEntityShape(up)
        self.assertEqual(up['__v'], 1)
        self.assertEqual(up['name'], 'Renamed')
        self.assertEqual(up['twitter'], '@new')
        for f in ('telegram', 'bannerURL', 'contracts', 'public', 'createdAt', 'id',
                  'isEnabled'):
            self.assertEqual(up[f], ent[f], f)
        self.assertGreater(up['modifiedAt'], ent['modifiedAt'])
        # Given optional fields change; entityID in the query selects the entity too.
        resp = self.post_entity(c['owner2'], self.body(self.owners(), telegram='', public=True,
                                                       contracts=[]),
                                query='&entityID=' + eid)
        up2 = self.assertOk(resp, 200)['data']
        self.assertEqual((up2['telegram'], up2['public'], up2['contracts'], up2['__v']),
                         ('', True, [], 2))
        # Body id and query entityID agreeing is fine; differing is 400 field id.
        resp = self.post_entity(c['owner'], self.body(self.owners(), id=eid),
                                query='&entityID=' + eid)
        self.assertEqual(self.assertOk(resp)['data']['__v'], 3)
        resp = self.post_entity(c['owner'], self.body(self.owners(), id=eid),
                                query='&entityID=' + new_entity_id())
        self.assertError(resp, 400, 'invalid_request', 'id')
        resp = self.post_entity(c['owner'], self.body(self.owners()), query='&entityID=c-nope')
        self.assertError(resp, 400, 'invalid_request', 'entityID')
        # Owners are replaced by ownerAddresses; the stored set follows.
        new_owner = rand_addr()
        up3 = self.assertOk(self.update(c['owner'], eid, [c['owner'].address, new_owner]))['data']
        self.assertEqual(up3['ownerAddress'], sorted([c['owner'].address, new_owner]))
        self.assertEqual(sorted(rcli(self.r, 'SMEMBERS', ekey(eid, ':owners'))),
                         up3['ownerAddress'])
        self.assertEqual(rcli(self.r, 'HGET', ekey(eid), '__v'), '4')
        # An unknown entity is 404.
        self.assertError(self.update(c['owner'], new_entity_id(), self.owners()), 404,
                         'not_found')

    def test_update_roles(self):
        c = self.c
        eid = self.fresh()
        for who in ('admin', 'member', 'stranger'):
            with self.subTest(role=who):
                self.assertError(self.update(c[who], eid, self.owners()), 403, 'forbidden')
        self.assertError(self.post_entity(c['owner'].aq, self.body(self.owners(), id=eid)),
                         401, 'unauthenticated')
        # A signature of another wallet for the owner's address.
        self.assertError(self.post_entity('address=%s&signature=%s' %
                                          (c['owner'].address, c['stranger'].signature),
                                          self.body(self.owners(), id=eid)),
                         401, 'unauthenticated')
        self.assertEqual(rcli(self.r, 'HGET', ekey(eid), '__v'), '0')
        self.assertEqual(self.assertOk(self.update(c['owner2'], eid, self.owners()))['data']['__v'],
                         1)
        # A platform admin acts as an owner.
        self.assertEqual(
            self.assertOk(self.update(c['platform'], eid, self.owners()))['data']['__v'], 2)

    def test_v_compare_and_set(self):
        c = self.c
        eid = self.fresh()
        self.assertError(self.update(c['owner'], eid, self.owners(), __v=1), 409, 'conflict')
        self.assertError(self.update(c['owner'], eid, self.owners(), __v=7), 409, 'conflict')
        self.assertEqual(rcli(self.r, 'HGET', ekey(eid), '__v'), '0')
        self.assertEqual(self.assertOk(self.update(c['owner'], eid, self.owners(), __v=0))
                         ['data']['__v'], 1)
        self.assertError(self.update(c['owner'], eid, self.owners(), __v=0), 409, 'conflict')
        self.assertEqual(self.assertOk(self.update(c['owner'], eid, self.owners(), __v=1))
                         ['data']['__v'], 2)

    def test_concurrent_updates_with_same_v_exactly_one_wins(self):
        c = self.c
        eid = self.fresh()
        self.assertOk(self.update(c['owner'], eid, self.owners()))
        n = 10
        names = ['Concurrent %d' % i for i in range(n)]
        results = run_parallel(
            [lambda i=i: self.update(c['owner'], eid, self.owners(), __v=1, name=names[i])
             for i in range(n)], scaled(60))
        for res in results:
            self.assertNotIsInstance(res, Exception)
        codes = sorted(res[0] for res in results)
        self.assertEqual(codes, [200] + [409] * (n - 1), [res[2] for res in results])
        winner = [res for res in results if res[0] == 200][0][2]['data']
        for res in results:
            if res[0] == 409:
                self.assertError(res, 409, 'conflict')
        stored = hgetall(self.r, ekey(eid))
        self.assertEqual(stored['__v'], '2')
        self.assertEqual(stored['name'], winner['name'])

    def test_is_enabled_only_for_platform_admins(self):
        c = self.c
        before = entity_ids(self.r)
        for v in (True, False):
            resp = self.post_entity(c['owner'], self.body([c['owner'].address], isEnabled=v))
            self.assertError(resp, 403, 'forbidden')
        self.assertEqual(entity_ids(self.r), before)
        eid = self.fresh()
        self.assertError(self.update(c['owner'], eid, self.owners(), isEnabled=True), 403,
                         'forbidden')
        self.assertEqual(rcli(self.r, 'HGET', ekey(eid), '__v'), '0')
        # A platform admin may create disabled and enable later.
        ent = self.create(c['platform'], owners=[c['owner'].address], isEnabled=False)
        self.assertIs(ent['isEnabled'], False)
        self.assertEqual(ent['ownerAddress'], sorted([c['owner'].address, c['platform'].address]))
        up = self.assertOk(self.update(c['platform'], ent['id'], [c['owner'].address],
                                       isEnabled=True))['data']
        self.assertIs(up['isEnabled'], True)

    # --- get ---

    def test_get_entity_auth_and_ids(self):
        c = self.c
        eid = self.fresh()
        ent = self.assertOk(self.get_entity(eid, c['stranger'], signed=False))['data']
        self.assertEntityShape(ent)
        self.assertEqual(ent['id'], eid)
        # address is required even unsigned.
        self.assertError(self.req('GET', '/api/entities/' + eid), 400, 'invalid_request',
                         'address')
        self.assertError(self.req('GET', '/api/entities/%s?address=0x12' % eid), 400,
                         'invalid_request', 'address')
        # A given signature is verified: wrong wallet, garbage.
        self.assertError(self.req('GET', '/api/entities/%s?address=%s&signature=%s' %
                                  (eid, c['stranger'].address, c['owner'].signature)),
                         401, 'unauthenticated')
        self.assertError(self.req('GET', '/api/entities/%s?address=%s&signature=0x1234' %
                                  (eid, c['stranger'].address)), 401, 'unauthenticated')
        # Unknown entity.
        self.assertError(self.get_entity(new_entity_id(), c['owner']), 404, 'not_found')
        self.assertError(self.get_entity(new_entity_id(), c['owner'], signed=False), 404,
                         'not_found')

    def test_malformed_entity_id_in_path_is_404(self):
        c = self.c
        eid = self.fresh()
        u = eid[2:]
        bad = ['c-nope', 'c-' + u.upper(), 's-' + u, u, 'c-' + u[:14] + '1' + u[15:],
               'c-' + u[:19] + 'c' + u[20:], eid + '0', 'c-' + u.replace('-', '')]
        for b in bad:
            with self.subTest(id=b):
                self.assertError(self.get_entity(b, c['owner']), 404, 'not_found')
                self.assertError(self.get_entity(b, c['owner'], signed=False), 404, 'not_found')
                self.assertError(self.users(b, c['owner']), 404, 'not_found')
                self.assertError(self.force_add(b, c['owner'], [rand_addr()]), 404, 'not_found')
                self.assertError(self.admins_get(b, c['owner']), 404, 'not_found')
                self.assertError(self.admins_post(b, c['owner'], [rand_addr()]), 404,
                                 'not_found')
                self.assertError(self.admins_delete(b, c['owner'], c['admin'].address), 404,
                                 'not_found')
        # Unknown but well-formed: 404 on every route.
        other = new_entity_id()
        self.assertError(self.users(other, c['owner']), 404, 'not_found')
        self.assertError(self.force_add(other, c['owner'], [rand_addr()]), 404, 'not_found')
        self.assertError(self.admins_get(other, c['owner']), 404, 'not_found')
        self.assertError(self.admins_post(other, c['owner'], [rand_addr()]), 404, 'not_found')
        self.assertError(self.admins_delete(other, c['owner'], c['admin'].address), 404,
                         'not_found')
        self.assertEqual(entity_ids(self.r) & {other}, set())

    # --- read rule ---

    def test_public_entity_read_rule(self):
        c = self.c
        eid = self.fresh(public=True)
        for who in self.ROLES:
            with self.subTest(role=who):
                self.assertOk(self.get_entity(eid, c[who]))
                self.assertOk(self.get_entity(eid, c[who], signed=False))
                self.assertUsersShape(self.assertOk(self.users(eid, c[who])))
                self.assertError(self.users(eid, c[who], signed=False), 401, 'unauthenticated')
        self.assertError(self.req('GET', '/api/entities/%s/users' % eid), 400,
                         'invalid_request', 'address')

    def test_private_entity_read_rule(self):
        c = self.c
        eid = self.fresh(public=False)
        for who in ('owner', 'owner2', 'admin', 'member', 'platform'):
            with self.subTest(role=who, signed=True):
                ent = self.assertOk(self.get_entity(eid, c[who]))['data']
                self.assertIs(ent['public'], False)
                body = self.assertOk(self.users(eid, c[who]))
                self.assertEqual([u['address'] for u in body['users']], [c['member'].address])
        for who in ('stranger', 'other'):
            with self.subTest(role=who, signed=True):
                self.assertError(self.get_entity(eid, c[who]), 403, 'forbidden')
                self.assertError(self.users(eid, c[who]), 403, 'forbidden')
        for who in self.ROLES:
            with self.subTest(role=who, signed=False):
                self.assertError(self.get_entity(eid, c[who], signed=False), 401,
                                 'unauthenticated')
                self.assertError(self.users(eid, c[who], signed=False), 401, 'unauthenticated')
        # Making it public opens it; private again closes it.
        self.assertOk(self.update(c['owner'], eid, self.owners(), public=True))
        self.assertOk(self.get_entity(eid, c['stranger'], signed=False))
        self.assertOk(self.users(eid, c['stranger']))
        self.assertOk(self.update(c['owner'], eid, self.owners(), public=False))
        self.assertError(self.get_entity(eid, c['stranger']), 403, 'forbidden')

    def test_disabled_entity(self):
        c = self.c
        eid = self.fresh(public=True)
        up = self.assertOk(self.update(c['platform'], eid, self.owners(), isEnabled=False))
        self.assertIs(up['data']['isEnabled'], False)
        self.assertEqual(hgetall(self.r, ekey(eid))['isEnabled'], '0')
        # Reads: owners and platform admins see it; everyone else gets 404.
        for who in ('owner', 'owner2', 'platform'):
            with self.subTest(read=who):
                ent = self.assertOk(self.get_entity(eid, c[who]))['data']
                self.assertIs(ent['isEnabled'], False)
                self.assertOk(self.users(eid, c[who]))
                self.assertAdmins(self.admins_get(eid, c[who]), [c['admin'].address])
        for who in ('admin', 'member', 'stranger'):
            with self.subTest(read=who):
                self.assertError(self.get_entity(eid, c[who]), 404, 'not_found')
                self.assertError(self.users(eid, c[who]), 404, 'not_found')
                self.assertError(self.admins_get(eid, c[who]), 404, 'not_found')
        for who in self.ROLES:
            with self.subTest(read_unsigned=who):
                st = self.get_entity(eid, c[who], signed=False)
                self.assertError(st, 404, 'not_found')
        # Writes by owners and admins: 403; by others: 404 (they cannot see it).
        self.assertError(self.update(c['owner'], eid, self.owners()), 403, 'forbidden')
        self.assertError(self.update(c['owner2'], eid, self.owners(), __v=1), 403, 'forbidden')
        self.assertError(self.force_add(eid, c['owner'], [rand_addr()]), 403, 'forbidden')
        self.assertError(self.force_add(eid, c['admin'], [rand_addr()]), 403, 'forbidden')
        self.assertError(self.admins_post(eid, c['owner'], [rand_addr()]), 403, 'forbidden')
        self.assertError(self.admins_delete(eid, c['owner'], c['admin'].address), 403,
                         'forbidden')
        for who in ('member', 'stranger'):
            with self.subTest(write=who):
                self.assertError(self.force_add(eid, c[who], [rand_addr()]), 404, 'not_found')
                self.assertError(self.update(c[who], eid, self.owners()), 404, 'not_found')
        # Nothing changed.
        records, order = members_state(self.r, eid)
        self.assertEqual(list(records), [c['member'].address])
        self.assertEqual(len(order), 1)
        self.assertEqual(rcli(self.r, 'SMEMBERS', ekey(eid, ':admins')), [c['admin'].address])
        self.assertEqual(rcli(self.r, 'HGET', ekey(eid), '__v'), '1')
        # The platform admin still writes, and enables it again.
        self.assertOk(self.force_add(eid, c['platform'], [rand_addr()]))
        up = self.assertOk(self.update(c['platform'], eid, self.owners(), isEnabled=True))
        self.assertIs(up['data']['isEnabled'], True)
        self.assertOk(self.get_entity(eid, c['stranger'], signed=False))
        self.assertOk(self.update(c['owner'], eid, self.owners()))
        self.assertOk(self.force_add(eid, c['admin'], [rand_addr()]))

    # --- users ---

    def test_users_page_shape_limits_and_bad_params(self):
        c = self.c
        eid = self.fresh()
        more = sorted(rand_addr() for _ in range(3))
        time.sleep(0.01)  # a later addedAt than the fixture member's
        self.assertOk(self.force_add(eid, c['admin'], more, chain='polygon-1'))
        body = self.assertOk(self.users(eid, c['owner']))
        self.assertUsersShape(body)
        self.assertIsNone(body['nextCursor'])
        got = body['users']
        self.assertEqual(len(got), 4)
        self.assertEqual(got[0]['address'], c['member'].address)
        self.assertEqual((got[0]['chain'], got[0]['addedBy']), ('ETH', c['owner'].address))
        self.assertEqual([u['address'] for u in got[1:]], more)  # same addedAt: by address
        for u in got[1:]:
            self.assertEqual((u['chain'], u['addedBy']), ('polygon-1', c['admin'].address))
            self.assertEqual(u['addedAt'], got[1]['addedAt'])
        self.assertLessEqual(got[0]['addedAt'], got[1]['addedAt'])
        # limit = count: no next page; limit below: a cursor to the rest.
        self.assertIsNone(self.assertOk(self.users(eid, c['owner'], extra='&limit=4'))
                          ['nextCursor'])
        users, pages = self.all_users(eid, c['owner'], 1)
        self.assertEqual((users, pages), (got, 4))
        users, pages = self.all_users(eid, c['owner'], 3)
        self.assertEqual((users, pages), (got, 2))
        p1 = self.assertOk(self.users(eid, c['owner'], extra='&limit=2'))
        self.assertEqual(p1['users'], got[:2])
        p2 = self.assertOk(self.users(eid, c['owner'], extra='&limit=1000&cursor=' +
                                      p1['nextCursor']))
        self.assertEqual((p2['users'], p2['nextCursor']), (got[2:], None))
        self.assertOk(self.users(eid, c['owner'], extra='&limit=1'))
        self.assertOk(self.users(eid, c['owner'], extra='&cursor='))
        for bad in ('0', '1001', '-1', 'abc', '', '1.5', '10x', '99999999999999999999'):
            with self.subTest(limit=bad):
                self.assertError(self.users(eid, c['owner'], extra='&limit=' + bad), 400,
                                 'invalid_request', 'limit')
        good = p1['nextCursor']
        for bad in ('zz', 'abc', good[:-2], good + '00', '00' * 59, good.upper()[:-1] + 'g'):
            with self.subTest(cursor=bad):
                self.assertError(self.users(eid, c['owner'], extra='&cursor=' + bad), 400,
                                 'invalid_request', 'cursor')
        st = self.users(eid, c['owner'], extra='&limit=2&limit=3')
        self.assertError(st, 400, 'invalid_request')

    def test_users_page_renders_stored_entries(self):
        """Pages are rendered from the stored member entries: addedAt from its milliseconds,
        entries of the first storage format as they are, and entries that could break the
        JSON skipped."""
        c = self.c
        eid = self.fresh()
        by = rand_addr()
        a = [rand_addr() for _ in range(5)]
        legacy = json.dumps({'address': a[1], 'chain': 'old', 'addedAt':
                             '2025-11-21T10:00:01.000Z', 'addedBy': by}, separators=(',', ':'))
        entries = {
            a[0]: '%016d:%s:%s:%s' % (1763719200123, a[0], by, 'chain_A-9'),
            a[1]: '%016d:%s:%s' % (1763719201000, a[1], legacy),
            a[2]: '%016d:%s:%s:%s' % (1763719202000, a[2], by, 'a"b'),
            a[3]: '%016d:%s:%s:' % (1763719203000, a[3], by),
            a[4]: '%016d:%s:%s' % (1763719204000, a[4], by),
        }
        for addr, e in entries.items():
            rcli(self.r, 'HSET', ekey(eid, ':members'), addr, e)
            rcli(self.r, 'ZADD', ekey(eid, ':members:order'), '0', e)
        users = self.assertOk(self.users(eid, c['owner']))['users']
        self.assertEqual(users[:2], [
            {'address': a[0], 'chain': 'chain_A-9', 'addedAt': '2025-11-21T10:00:00.123Z',
             'addedBy': by, 'via': 'manual'},
            dict(json.loads(legacy), via='manual')])
        self.assertEqual([u['address'] for u in users[2:]], [c['member'].address])

    def test_users_page_cache_follows_every_change(self):
        """A cached page is served only while the member list is unchanged, whoever changed
        it: this process, another entityd process, or a writer that does not set the version
        (an older release during an upgrade)."""
        c = self.c
        eid = self.fresh()
        other = self.entityd(redis=self.r)

        def page(port=None):
            return [u['address'] for u in
                    self.assertOk(self.users(eid, c['owner'], port=port))['users']]

        def cache_counts():
            text = harness.request(self.port, 'GET', '/metrics')[2].decode()
            return {o: int(re.search(r'entityd_users_page_cache_total\{outcome="%s"\} (\d+)'
                                     % o, text).group(1)) for o in ('hit', 'miss', 'stale')}

        def settled(want, what):
            # A change made by another writer reaches this process's read cache with Redis's
            # invalidation message, which on a loaded machine may come after the next request.
            harness.wait_for(lambda: page() == want, scaled(5), interval=0.02, what=what)
            self.assertEqual(page(), want)

        want = [c['member'].address]
        self.assertEqual(page(), want)
        before = cache_counts()
        self.assertEqual(page(), want)
        after = cache_counts()
        self.assertEqual(after['hit'] - before['hit'], 1, (before, after))
        # Another process adds a member.
        time.sleep(0.01)
        x = rand_addr()
        self.assertOk(self.force_add(eid, c['owner'], [x], port=other.port))
        want.append(x)
        settled(want, "the other process's member")
        self.assertEqual(cache_counts()['stale'] - after['stale'], 1)
        self.assertEqual(page(), want)
        # A member written straight into Redis, membersVersion left as it was.
        y = '0x' + 'f' * 40
        e = '%016d:%s:%s:ETH' % (int(time.time() * 1000) + 1000, y, c['owner'].address)
        rcli(self.r, 'HSET', ekey(eid, ':members'), y, e)
        rcli(self.r, 'ZADD', ekey(eid, ':members:order'), '0', e)
        want.append(y)
        settled(want, 'the member written straight into Redis')
        # Re-adding present members changes nothing and keeps the cached page.
        v = rcli(self.r, 'HGET', ekey(eid), 'membersVersion')
        self.assertRegex(v, r'^[0-9a-f]{16}$')
        self.assertEqual(self.assertOk(self.force_add(eid, c['owner'], [x]))['existing'], 1)
        self.assertEqual(rcli(self.r, 'HGET', ekey(eid), 'membersVersion'), v)
        before = cache_counts()
        self.assertEqual(page(), want)
        self.assertEqual(cache_counts()['hit'] - before['hit'], 1)
        # Roles are checked on every read, cached page or not.
        self.assertOk(self.update(c['owner'], eid, self.owners(), public=False))
        self.assertError(self.users(eid, c['stranger']), 403, 'forbidden')
        self.assertEqual(page(), want)
        # Without a cache (PAGE_CACHE_SIZE=0) the pages are the same.
        nocache = self.entityd(redis=self.r, env={'PAGE_CACHE_SIZE': 0})
        for _ in range(2):
            self.assertEqual(page(nocache.port), want)
        text = harness.request(nocache.port, 'GET', '/metrics')[2].decode()
        self.assertIn('entityd_users_page_cache_total{outcome="hit"} 0\n', text)

    def test_pagination_2500_members_in_order_each_once(self):
        c = self.c
        eid = self.fresh()
        rcli(self.r, 'DEL', ekey(eid, ':members'), ekey(eid, ':members:order'))
        batches = [[rand_addr() for _ in range(1000)], [rand_addr() for _ in range(1000)],
                   [rand_addr() for _ in range(500)]]
        for i, batch in enumerate(batches):
            if i:
                time.sleep(0.01)  # a later addedAt for the next batch
            body = self.assertOk(self.force_add(eid, c['owner'], batch, chain='chain%d' % i))
            self.assertEqual((body['added'], body['existing']), (len(batch), 0))
        self.assertEqual(rcli(self.r, 'HLEN', ekey(eid, ':members')), 2500)
        self.assertEqual(rcli(self.r, 'ZCARD', ekey(eid, ':members:order')), 2500)
        users, pages = self.all_users(eid, c['owner'], 1000)
        self.assertEqual(pages, 3)
        addrs = [u['address'] for u in users]
        self.assertEqual(len(addrs), 2500)
        self.assertEqual(len(set(addrs)), 2500, 'a member listed twice')
        self.assertEqual(set(addrs), set(sum(batches, [])))
        keys = [(u['addedAt'], u['address']) for u in users]
        self.assertEqual(keys, sorted(keys), 'not in (addedAt, address) order')
        # Each batch shares one addedAt, later batches later ones; the order is by address
        # within a batch, not by request order.
        by_addr = {u['address']: u for u in users}
        stamps = []
        for i, batch in enumerate(batches):
            st = {by_addr[a]['addedAt'] for a in batch}
            self.assertEqual(len(st), 1, st)
            stamps.append(st.pop())
            self.assertEqual({by_addr[a]['chain'] for a in batch}, {'chain%d' % i})
        self.assertEqual(stamps, sorted(set(stamps)), 'batches share an addedAt')
        self.assertEqual(addrs[:1000], sorted(batches[0]))
        # Re-adding keeps the existing records.
        body = self.assertOk(self.force_add(eid, c['admin'], batches[0][:10] + [rand_addr()],
                                            chain='other'))
        self.assertEqual((body['added'], body['existing']), (1, 10))
        page = self.assertOk(self.users(eid, c['owner'], extra='&limit=1000'))
        self.assertEqual(page['users'], users[:1000])

    # --- force-add ---

    def test_force_add_success_duplicates_and_validation(self):
        c = self.c
        eid = self.fresh()
        a1, a2, a3 = rand_addr(), rand_addr(), rand_addr()
        resp = self.force_add(eid, c['owner'], [a1, harness.eip55(a1), '0x' + a2[2:].upper(), a2],
                              chain='ETH')
        body = self.assertOk(resp)
        self.assertEqual(body, {'success': True, 'added': 2, 'existing': 0})
        # Lower-case key accepted; existing members keep their record.
        body = self.assertOk(self.force_add(eid, c['admin'], [a2, a3, c['member'].address],
                                            chain='sol_1', key='chain'))
        self.assertEqual(body, {'success': True, 'added': 1, 'existing': 2})
        records, order = members_state(self.r, eid)
        self.assertEqual(records[a2][1:], ('ETH', c['owner'].address))
        self.assertEqual(records[a3][1:], ('sol_1', c['admin'].address))
        self.assertEqual(len(records), 4)
        self.assertEqual(sorted(a for _, a in order), sorted(records))
        # All or nothing: one bad address anywhere refuses the whole request.
        n_before = (rcli(self.r, 'HLEN', ekey(eid, ':members')),
                    rcli(self.r, 'ZCARD', ekey(eid, ':members:order')))
        fresh = [rand_addr() for _ in range(20)]
        bad_rows = [
            (fresh[:5] + ['0x1234'] + fresh[5:], 'addresses[5]'),
            (['nope'] + fresh, 'addresses[0]'),
            (fresh + [5], 'addresses[20]'),
            (fresh + [None], 'addresses[20]'),
            (fresh[:3] + ['0x' + 'g' * 40], 'addresses[3]'),
            (fresh[:2] + [fresh[0][:-1]], 'addresses[2]'),
        ]
        mixed = harness.eip55(fresh[0])
        swapped = mixed[:2] + mixed[2:].swapcase()
        if swapped[2:] not in (swapped[2:].lower(), swapped[2:].upper()):
            bad_rows.append((fresh[1:4] + [swapped], 'addresses[3]'))
        for addrs, field in bad_rows:
            with self.subTest(field=field):
                self.assertError(self.force_add(eid, c['owner'], addrs), 400, 'invalid_request',
                                 field)
        for body_, field in (({}, 'addresses'), ({'addresses': [], 'Chain': 'ETH'}, 'addresses'),
                             ({'addresses': fresh[0], 'Chain': 'ETH'}, 'addresses'),
                             ({'addresses': {}, 'Chain': 'ETH'}, 'addresses'),
                             ({'addresses': 5, 'Chain': 'ETH'}, 'addresses'),
                             ({'addresses': [rand_addr() for _ in range(1001)], 'Chain': 'ETH'},
                              'addresses'),
                             ({'addresses': fresh}, 'Chain'),
                             ({'addresses': fresh, 'Chain': 5}, 'Chain'),
                             ({'addresses': fresh, 'Chain': ''}, 'Chain'),
                             ({'addresses': fresh, 'Chain': 'a b'}, 'Chain'),
                             ({'addresses': fresh, 'Chain': 'x' * 33}, 'Chain'),
                             ({'addresses': fresh, 'chain': 'é'}, 'Chain'),
                             ({'addresses': fresh, 'Chain': None}, 'Chain')):
            with self.subTest(body=repr(body_)[:60]):
                resp = self.req('POST', '/api/entities/%s/force-add?%s' % (eid, c['owner'].q),
                                body_)
                self.assertError(resp, 400, 'invalid_request', field)
        self.assertError(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, c['owner'].q),
                                  b'[1]', headers={'Content-Type': 'application/json'}),
                         400, 'invalid_json')
        self.assertEqual((rcli(self.r, 'HLEN', ekey(eid, ':members')),
                          rcli(self.r, 'ZCARD', ekey(eid, ':members:order'))), n_before)
        # 1000 distinct addresses are fine, 32-character chains too.
        big = [rand_addr() for _ in range(1000)]
        body = self.assertOk(self.force_add(eid, c['platform'], big, chain='C' * 32))
        self.assertEqual((body['added'], body['existing']), (1000, 0))

    def test_force_add_roles(self):
        c = self.c
        eid = self.fresh()
        for who in ('member', 'stranger'):
            with self.subTest(role=who):
                self.assertError(self.force_add(eid, c[who], [rand_addr()]), 403, 'forbidden')
        for who in self.ROLES:
            with self.subTest(unsigned=who):
                self.assertError(self.force_add(eid, c[who], [rand_addr()], signed=False), 401,
                                 'unauthenticated')
        self.assertEqual(rcli(self.r, 'HLEN', ekey(eid, ':members')), 1)
        for who in ('owner', 'owner2', 'admin', 'platform'):
            with self.subTest(allowed=who):
                self.assertOk(self.force_add(eid, c[who], [rand_addr()]))
        self.assertEqual(rcli(self.r, 'HLEN', ekey(eid, ':members')), 5)
        # Private entity: same rule (members may read, not add).
        eid2 = self.fresh(public=False)
        self.assertError(self.force_add(eid2, c['member'], [rand_addr()]), 403, 'forbidden')
        self.assertError(self.force_add(eid2, c['stranger'], [rand_addr()]), 403, 'forbidden')
        self.assertOk(self.force_add(eid2, c['admin'], [rand_addr()]))

    def test_concurrent_force_adds_of_distinct_addresses_all_listed(self):
        c = self.c
        eid = self.fresh()
        addrs = [rand_addr() for _ in range(50)]
        callers = [c['owner'], c['owner2'], c['admin'], c['platform']]
        results = run_parallel(
            [lambda i=i: self.force_add(eid, callers[i % 4], [addrs[i]]) for i in range(50)],
            scaled(60))
        for res in results:
            self.assertNotIsInstance(res, Exception)
            self.assertEqual(res[0], 200, res)
            self.assertEqual(res[2], {'success': True, 'added': 1, 'existing': 0})
        users, _ = self.all_users(eid, c['owner'], 1000)
        got = [u['address'] for u in users]
        self.assertEqual(sorted(got), sorted(addrs + [c['member'].address]))
        keys = [(u['addedAt'], u['address']) for u in users]
        self.assertEqual(keys, sorted(keys))
        records, order = members_state(self.r, eid)
        self.assertEqual(sorted(records), sorted(a for _, a in order))

    # --- admins ---

    def test_admins_routes(self):
        c = self.c
        eid = self.fresh()
        x, y = rand_addr(), rand_addr()
        self.assertAdmins(self.admins_get(eid, c['owner']), [c['admin'].address])
        self.assertAdmins(self.admins_get(eid, c['admin']), [c['admin'].address])
        self.assertAdmins(self.admins_get(eid, c['platform']), [c['admin'].address])
        self.assertAdmins(self.admins_post(eid, c['owner2'], [harness.eip55(x), y, x]),
                          [c['admin'].address, x, y])
        self.assertEqual(sorted(rcli(self.r, 'SMEMBERS', ekey(eid, ':admins'))),
                         sorted([c['admin'].address, x, y]))
        # Adding an existing admin is no change.
        self.assertAdmins(self.admins_post(eid, c['owner'], [y]), [c['admin'].address, x, y])
        # Removing: any spelling of the address; removing a non-admin is no error; a platform
        # admin acts as an owner.
        self.assertAdmins(self.admins_delete(eid, c['owner'], harness.eip55(x)),
                          [c['admin'].address, y])
        self.assertAdmins(self.admins_delete(eid, c['owner'], x), [c['admin'].address, y])
        self.assertAdmins(self.admins_delete(eid, c['platform'], y), [c['admin'].address])
        # Roles: GET owners/admins; POST/DELETE owners only (and an admin removing itself,
        # CONTRACT section 8: test_tend.py).
        for who in ('member', 'stranger'):
            with self.subTest(get=who):
                self.assertError(self.admins_get(eid, c[who]), 403, 'forbidden')
        for who in ('admin', 'member', 'stranger'):
            with self.subTest(write=who):
                self.assertError(self.admins_post(eid, c[who], [rand_addr()]), 403, 'forbidden')
                other = rand_addr() if who == 'admin' else c['admin'].address
                self.assertError(self.admins_delete(eid, c[who], other), 403, 'forbidden')
        for who in self.ROLES:
            with self.subTest(unsigned=who):
                self.assertError(self.admins_get(eid, c[who], signed=False), 401,
                                 'unauthenticated')
                self.assertError(self.admins_post(eid, c[who], [rand_addr()], signed=False), 401,
                                 'unauthenticated')
                self.assertError(self.admins_delete(eid, c[who], c['admin'].address,
                                                    signed=False), 401, 'unauthenticated')
        self.assertEqual(rcli(self.r, 'SMEMBERS', ekey(eid, ':admins')), [c['admin'].address])
        # Removing the admin takes its rights away.
        self.assertAdmins(self.admins_delete(eid, c['owner'], c['admin'].address), [])
        self.assertError(self.force_add(eid, c['admin'], [rand_addr()]), 403, 'forbidden')
        self.assertError(self.admins_get(eid, c['admin']), 403, 'forbidden')
        # Private entity: the admin reads it, a removed admin does not.
        eid2 = self.fresh(public=False)
        self.assertOk(self.get_entity(eid2, c['admin']))
        self.assertAdmins(self.admins_delete(eid2, c['owner'], c['admin'].address), [])
        self.assertError(self.get_entity(eid2, c['admin']), 403, 'forbidden')

    def test_admins_body_validation(self):
        c = self.c
        eid = self.fresh()
        a = rand_addr()
        rows = [({}, 'addresses'), ({'addresses': []}, 'addresses'),
                ({'addresses': a}, 'addresses'), ({'addresses': 5}, 'addresses'),
                ({'addresses': {}}, 'addresses'), ({'addresses': None}, 'addresses'),
                ({'addresses': [a, 'nope']}, 'addresses[1]'), ({'addresses': [7]}, 'addresses[0]'),
                ({'addresses': [rand_addr() for _ in range(101)]}, 'addresses')]
        for body, field in rows:
            with self.subTest(body=repr(body)[:60]):
                self.assertError(self.req('POST', '/api/entities/%s/admins?%s' %
                                          (eid, c['owner'].q), body),
                                 400, 'invalid_request', field)
        self.assertEqual(rcli(self.r, 'SMEMBERS', ekey(eid, ':admins')), [c['admin'].address])
        hundred = [rand_addr() for _ in range(100)]
        self.assertAdmins(self.admins_post(eid, c['owner'], hundred),
                          hundred + [c['admin'].address])
        # A malformed address in the path names no admin.
        for bad in ('0x12', 'nope', '0x' + 'g' * 40):
            with self.subTest(path_address=bad):
                self.assertError(self.admins_delete(eid, c['owner'], bad), 404, 'not_found')

    # --- community alias ---

    def wait_released(self, alias):
        # The service releases the old claim right after its write, next to the response: on
        # the same Redis connection, so its own later claims see it gone, but a separate
        # observer may look a moment before it lands.
        harness.wait_for(lambda: alias_holder(self.r, alias) is None, scaled(2),
                         what='alias %s released' % alias)

    def test_alias_unique_and_released_on_change(self):
        c = self.c
        x, y = 'alias-x-' + rand_tag(), 'alias-y-' + rand_tag()
        a = self.create(c['owner'], communityURLAlias=x)
        self.assertEqual(alias_holder(self.r, x), a['id'])
        # Taken: create and update both 409 naming the field; nothing stored.
        before = entity_ids(self.r)
        err = self.assertError(self.post_entity(c['stranger'], self.body(
            [c['stranger'].address], communityURLAlias=x)), 409, 'conflict', 'communityURLAlias')
        self.assertEqual(entity_ids(self.r), before)
        b = self.create(c['stranger'])
        self.assertError(self.update(c['stranger'], b['id'], [c['stranger'].address],
                                     communityURLAlias=x), 409, 'conflict', 'communityURLAlias')
        self.assertEqual(hgetall(self.r, ekey(b['id']))['communityURLAlias'], '')
        self.assertEqual(hgetall(self.r, ekey(b['id']))['__v'], '0')
        # Keeping one's own alias is fine; an update leaving it out keeps it.
        self.assertOk(self.update(c['owner'], a['id'], [c['owner'].address], communityURLAlias=x))
        up = self.assertOk(self.update(c['owner'], a['id'], [c['owner'].address]))['data']
        self.assertEqual(up['communityURLAlias'], x)
        self.assertEqual(alias_holder(self.r, x), a['id'])
        # Changing it releases the old one, which another entity can then take.
        up = self.assertOk(self.update(c['owner'], a['id'], [c['owner'].address],
                                       communityURLAlias=y))['data']
        self.assertEqual(up['communityURLAlias'], y)
        self.wait_released(x)
        self.assertEqual(alias_holder(self.r, y), a['id'])
        up = self.assertOk(self.update(c['stranger'], b['id'], [c['stranger'].address],
                                       communityURLAlias=x))['data']
        self.assertEqual(up['communityURLAlias'], x)
        self.assertEqual(alias_holder(self.r, x), b['id'])
        # Clearing it ("") releases it too.
        self.assertOk(self.update(c['owner'], a['id'], [c['owner'].address], communityURLAlias=''))
        self.wait_released(y)
        d = self.create(c['other'], communityURLAlias=y)
        self.assertEqual(alias_holder(self.r, y), d['id'])
        self.assertTrue(err['message'])

    def test_stale_alias_claims_are_taken_over(self):
        # A claim left behind by a write that never happened (crash): the holder's record
        # names another alias, or the holder does not exist. The next claimant takes it.
        c = self.c
        holder = self.create(c['owner'], communityURLAlias='held-' + rand_tag())
        z1, z2 = 'stale-a-' + rand_tag(), 'stale-b-' + rand_tag()
        rcli(self.r, 'SET', alias_key(z1), holder['id'])
        rcli(self.r, 'SET', alias_key(z2), new_entity_id())
        e1 = self.create(c['stranger'], communityURLAlias=z1)
        e2 = self.create(c['stranger'], communityURLAlias=z2)
        self.assertEqual(alias_holder(self.r, z1), e1['id'])
        self.assertEqual(alias_holder(self.r, z2), e2['id'])
        # A live claim is not taken over.
        self.assertError(self.post_entity(c['stranger'], self.body(
            [c['stranger'].address], communityURLAlias=holder['communityURLAlias'])),
            409, 'conflict', 'communityURLAlias')

    def test_concurrent_alias_claims_exactly_one_wins(self):
        c = self.c
        for round_ in range(3):
            alias = 'race-%d-%s' % (round_, rand_tag())
            before = entity_ids(self.r)
            callers = [c['owner'], c['stranger'], c['other'], c['owner2']]
            n = 20
            results = run_parallel(
                [lambda i=i: self.post_entity(callers[i % 4], self.body(
                    [callers[i % 4].address], communityURLAlias=alias)) for i in range(n)],
                scaled(60))
            for res in results:
                self.assertNotIsInstance(res, Exception)
            codes = sorted(res[0] for res in results)
            created = entity_ids(self.r) - before
            holders = [e for e in created
                       if rcli(self.r, 'HGET', ekey(e), 'communityURLAlias') == alias]
            self.assertEqual(codes, [201] + [409] * (n - 1),
                             'round %d: statuses %s; %d entities created, %d of them hold the '
                             'alias %r; alias key -> %r' %
                             (round_, codes, len(created), len(holders), alias,
                              alias_holder(self.r, alias)))
            winner = [res for res in results if res[0] == 201][0][2]['data']
            for res in results:
                if res[0] == 409:
                    self.assertError(res, 409, 'conflict', 'communityURLAlias')
            self.assertEqual(created, {winner['id']})
            self.assertEqual(scan_keys(self.r, alias_key(alias)), [alias_key(alias)])
            self.assertEqual(alias_holder(self.r, alias), winner['id'])
            self.assertEqual(winner['communityURLAlias'], alias)

    # --- Redis round trips ---

    def test_round_trips_by_commandstats(self):
        """What each request costs Redis when it is read from Redis: the read cache is off in
        the instance measured (test_read_cache_* pin what it saves)."""
        c = self.c
        eid = self.fresh()
        port = self.entityd(redis=self.r, env={'READ_CACHE_MB': '0'}).port
        # the instance's start-up look at the find backfill (a GET) must not land in a count
        harness.wait_for(lambda: b'entityd_find_backfill_done 1' in
                         harness.request(port, 'GET', '/metrics')[2], scaled(10),
                         what='the new instance past its backfill check')
        get_entity, users = self.get_entity, self.users
        self.get_entity = lambda *a, **kw: get_entity(*a, port=port, **kw)
        self.users = lambda *a, **kw: users(*a, port=port, **kw)
        self.assertOk(self.get_entity(eid, c['stranger']))  # signature recovered and cached

        def cost(fn):
            # Redis quiet first: an instance's one-off start-up commands (the find backfill's
            # GETs, seen counted in a read on a loaded run) or a write's index work sent after
            # its answer must not land in the count.
            wait_redis_quiet(self.r, 'Redis quiet before a count')
            before = commandstats(self.r)
            resp = fn()
            after = commandstats(self.r)
            return resp, stats_delta(before, after)

        resp, unsigned = cost(lambda: self.get_entity(eid, c['stranger'], signed=False))
        self.assertOk(resp)
        resp, signed = cost(lambda: self.get_entity(eid, c['stranger']))
        self.assertOk(resp)
        resp, page = cost(lambda: self.users(eid, c['stranger'], extra='&limit=1000'))
        self.assertOk(resp)
        resp, cached = cost(lambda: self.users(eid, c['stranger'], extra='&limit=1000'))
        self.assertEqual(self.assertOk(resp), self.assertOk(self.users(eid, c['stranger'],
                                                                       extra='&limit=999')))
        batch = [rand_addr() for _ in range(1000)]
        resp, fadd = cost(lambda: self.force_add(eid, c['admin'], batch))
        self.assertEqual(self.assertOk(resp)['added'], 1000)
        resp, stale = cost(lambda: self.users(eid, c['stranger'], extra='&limit=1000'))
        self.assertEqual(len(self.assertOk(resp)['users']), 1000)
        # Commands called inside scripts count in commandstats too, so only what no script
        # can do is exact here (the proxy test below sees the service's own commands):
        # EVALSHA (at most one per request, and no EVAL fallback; a write that gives roles two
        # more: the read-only check of the caller's right, CONTRACT §12, then its index add,
        # §9) and the revocation EXISTS that a signed request adds to the same read.
        for name, d in (('unsigned get', unsigned), ('signed get', signed), ('users', page),
                        ('force-add', fadd)):
            with self.subTest(op=name):
                self.assertLessEqual(d.get('evalsha', 0), 3 if name == 'force-add' else 1, d)
                self.assertNotIn('eval', d)
                self.assertNotIn('script', d)
        self.assertEqual(signed.get('exists', 0) - unsigned.get('exists', 0), 1,
                         (signed, unsigned))
        # Unsigned: one plain HMGET. Signed, of a public entity: the same HMGET plus the
        # revocation EXISTS, sent together; no role lookup, since no role changes the answer.
        self.assertEqual(unsigned, {'hmget': 1}, unsigned)
        self.assertEqual(signed, {'exists': 1, 'hmget': 1}, signed)
        # A users page read from Redis is gated (CONTRACT section 12): one read-only script in
        # one transaction, the flags and the caller's role lookups first, then the version
        # field, the page (ZRANGEBYLEX) and its count (ZCARD) only where the caller may read
        # them. Read again it comes from the page cache: the version alone is asked for, with
        # plain commands. After a change the version read finds the cached page stale and a
        # second, gated transaction reads the page.
        gated = {'multi': 1, 'evalsha': 1, 'exec': 1, 'hmget': 2, 'sismember': 2, 'hexists': 1,
                 'zrangebylex': 1, 'zcard': 1}
        self.assertEqual(page, dict(gated, exists=1), page)
        self.assertEqual(cached, {'exists': 1, 'multi': 1, 'hmget': 1, 'zcard': 1, 'exec': 1},
                         cached)
        self.assertEqual(stale, dict(gated, exists=1, multi=2, exec=2, hmget=3, zcard=2), stale)
        # A private entity: the first read finds that the role decides, and a second, gated
        # read (one script in one transaction) reads again with the caller's role lookups
        # (SISMEMBER owners, SISMEMBER admins, HEXISTS members) and gives the entity only to a
        # caller who may read it.
        self.assertOk(self.update(c['owner'], eid, self.owners(), public=False))
        # The update's index drops (CONTRACT §9: the directory entry of an entity no longer
        # public) are sent after its answer; let them land before counting the next read.
        wait_redis_quiet(self.r, "the update's index drops")
        resp, private = cost(lambda: self.get_entity(eid, c['member']))
        self.assertOk(resp)
        self.assertEqual(private, {'exists': 1, 'hmget': 2, 'multi': 1, 'evalsha': 1,
                                   'sismember': 2, 'hexists': 1, 'exec': 1}, private)
        resp, refused = cost(lambda: self.get_entity(eid, c['stranger']))
        self.assertError(resp, 403, 'forbidden')
        self.assertEqual(refused, {'exists': 1, 'hmget': 2, 'multi': 1, 'evalsha': 1,
                                   'sismember': 2, 'hexists': 1, 'exec': 1}, refused)
        resp, unsigned_private = cost(lambda: self.get_entity(eid, c['member'], signed=False))
        self.assertError(resp, 401, 'unauthenticated')
        self.assertEqual(unsigned_private, {'hmget': 1}, unsigned_private)
        # One script call for 1000 addresses, after one for their 1000 wallets' index entries
        # and, before that, one read-only check of the caller's right (CONTRACT §12).
        self.assertEqual(fadd.get('evalsha', 0), 3, fadd)
        self.assertEqual(fadd.get('hsetnx', 0), 1000, fadd)
        # exists: the revocation check, the scripts' slot-moving probes and the entity checks
        # (the right's check and the write's own).
        self.assertLessEqual(fadd.get('exists', 0), 6, fadd)


def command_units(cmds):
    """Commands grouped into units: a MULTI ... EXEC transaction is one unit, any other command
    (a script call included) one unit each. cmds: lists of bytes arguments."""
    units, cur = [], None
    for cmd in cmds:
        name = cmd[0].decode().upper()
        if cur is not None:
            cur.append(name)
            if name in ('EXEC', 'DISCARD'):
                units.append(' '.join(cur))
                cur = None
        elif name == 'MULTI':
            cur = [name]
        else:
            units.append(name)
    if cur is not None:
        units.append(' '.join(cur))
    return units


def round_trips(events):
    """Waves of commands separated by replies: with replies held back, commands sent together
    (pipelined) fall in one wave; a command that waited for a reply starts a new one."""
    waves, last = 0, 'reply'
    for e in events:
        if e[1] == 'cmd' and last == 'reply':
            waves += 1
        last = e[1]
    return waves


class RoundTripProxyTest(EntityCase):
    """The commands the service itself sends, as a proxy between it and Redis sees them, and
    how many round trips they take when every reply is held back."""

    def setUp(self):
        super().setUp()
        self.r = self.redis()
        self.proxy = FaultProxy(self.r, record=True).start()
        self.addCleanup(self.proxy.stop)
        # The read cache off: its heartbeats and tracking commands would be in every count
        # (test_read_cache_* pin what it changes).
        self.svc = self.entityd(redis=None, env={'REDIS_URL': self.proxy.url,
                                                 'READ_CACHE_MB': '0'})
        self.port = self.svc.port
        self.c = make_callers(self.port, ('owner', 'reader'))

    def measure(self, fn):
        """(response, units, round trips, raw commands) of one request, replies held back."""
        m = self.proxy.mark()
        self.proxy.delay(scaled(250))
        try:
            resp = fn()
        finally:
            self.proxy.release()
        # The webhook engine's look through its sets (`webhooks`, `webhooks:{platform}`: its
        # own timer, every request's neighbour) is no part of the request.
        events = [e for e in self.proxy.since(m)
                  if not (e[1] == 'cmd' and len(e[2]) > 1 and e[2][1].startswith(b'webhooks'))]
        cmds = [e[2] for e in events if e[1] == 'cmd']
        return resp, command_units(cmds), round_trips(events), cmds

    def revocation_units(self, cmds):
        return [c for c in cmds if c[0].upper() == b'EXISTS' and len(c) == 2 and
                c[1].startswith(b'auth:revoked:')]

    def test_commands_and_round_trips_per_request(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        self.assertOk(self.force_add(eid, c['owner'], [rand_addr()]))
        for who in ('owner', 'reader'):  # recover and cache both signatures
            self.assertOk(self.get_entity(eid, c[who]))
        # Unsigned GET: one command, one round trip.
        resp, units, trips, cmds = self.measure(
            lambda: self.get_entity(eid, c['reader'], signed=False))
        self.assertOk(resp)
        self.assertEqual((len(units), trips), (1, 1), 'unsigned GET entity: %s' % units)
        self.assertEqual(self.revocation_units(cmds), [])
        ops = (('signed GET entity', lambda: self.get_entity(eid, c['reader'])),
               ('users page', lambda: self.users(eid, c['reader'], extra='&limit=1000')),
               ('force-add 1000', lambda: self.force_add(
                   eid, c['owner'], [rand_addr() for _ in range(1000)])))
        for name, fn in ops:
            with self.subTest(op=name):
                resp, units, trips, cmds = self.measure(fn)
                self.assertOk(resp)
                # The revocation check and one data command (a script or a transaction); a
                # write that gives roles first checks the caller's right (CONTRACT §12), then
                # adds their index entries (§9): two more scripts, and two more round trips,
                # since each waits for the one before.
                extra = 2 if name == 'force-add 1000' else 0
                self.assertEqual(len(self.revocation_units(cmds)), 1, '%s: %s' % (name, units))
                self.assertEqual(len(units), 2 + extra, '%s: %s' % (name, units))
                self.assertLessEqual(trips, 2 + extra, '%s: %s' % (name, units))
                if name == 'force-add 1000':
                    self.assertIn('EVALSHA', units)

    def test_signed_get_pipelines_data_read_with_revocation_check(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        self.assertOk(self.get_entity(eid, c['reader']))  # signature cached: no recovery wait
        resp, units, trips, _ = self.measure(lambda: self.get_entity(eid, c['reader']))
        self.assertOk(resp)
        self.assertEqual(len(units), 2, units)
        self.assertEqual(trips, 1, 'signed GET entity: the data read %s waited for the revocation '
                         'EXISTS reply (%d sequential round trips) instead of being pipelined '
                         'with it' % (units, trips))


read_cache_metrics = harness.read_cache_metrics


class ReadCacheTest(EntityCase):
    """The read cache: two instances (A and B, both with the cache on) on one Redis. A read
    answered from the cache costs Redis nothing; whatever changes a key (a write through
    either instance, a raw write to Redis, a flush) is seen by the next read on both; and the
    cache is off whenever invalidations could be lost."""

    def setUp(self):
        super().setUp()
        self.r = self.redis(appendonly=True, appendfsync='always')  # survives a restart
        self.a = self.entityd(redis=self.r)
        self.b = self.entityd(redis=self.r)
        self.port = self.a.port
        for svc in (self.a, self.b):
            harness.wait_for(lambda: read_cache_metrics(svc.port).get(
                'entityd_read_cache_enabled') == 1, scaled(10), what='read cache on')
        self.c = make_callers(self.a.port, ('owner', 'reader', 'revoked'))

    def cost(self, fn):
        before = commandstats(self.r)
        resp = fn()
        return resp, stats_delta(before, commandstats(self.r))

    def eventually(self, fn, check, what):
        """fn() until check(result) holds: an instance hears of another's write through
        Redis's invalidation message, which races the next request by microseconds."""
        out = {}

        def ok():
            out['r'] = fn()
            return check(out['r'])
        harness.wait_for(ok, scaled(2), what=what)
        return out['r']

    def test_repeated_reads_cost_redis_nothing(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        for _ in range(2):  # the signature, the revocation check and the entity now cached
            self.assertOk(self.get_entity(eid, c['reader']))
            self.assertOk(self.get_entity(eid, c['reader'], signed=False))
        hits = read_cache_metrics(self.port)['entityd_read_cache_total{outcome="hit"}']
        resp, signed = self.cost(lambda: self.get_entity(eid, c['reader']))
        self.assertEqual(self.assertOk(resp)['data']['id'], eid)
        resp, unsigned = self.cost(lambda: self.get_entity(eid, c['reader'], signed=False))
        self.assertOk(resp)
        self.assertEqual((signed, unsigned), ({}, {}))
        self.assertEqual(read_cache_metrics(self.port)['entityd_read_cache_total{outcome="hit"}'],
                         hits + 3)  # revocation check + entity, then the entity
        # A write through this instance: its own next read is the new entity, read again
        # tracked (CLIENT CACHING in front of the HMGET; the revocation check still cached).
        self.assertOk(self.update(c['owner'], eid, [c['owner'].address], name='Renamed'))
        wait_redis_quiet(self.r, "the update's index writes")
        resp, after = self.cost(lambda: self.get_entity(eid, c['reader']))
        self.assertEqual(self.assertOk(resp)['data']['name'], 'Renamed')
        self.assertEqual(after, {'client|caching': 1, 'hmget': 1}, after)
        # Users pages and skills read the same way.
        self.assertOk(self.force_add(eid, c['owner'], [rand_addr()]))
        for _ in range(2):
            self.assertOk(self.users(eid, c['reader']))
        wait_redis_quiet(self.r, "the force-add's index writes")
        resp, page = self.cost(lambda: self.users(eid, c['reader']))
        self.assertEqual(len(self.assertOk(resp)['users']), 1)
        self.assertEqual(page, {})

    def test_changes_through_either_instance_or_redis_are_seen_on_both(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        name = lambda svc: self.get_entity(eid, c['reader'], port=svc.port)
        for svc in (self.a, self.b):
            for _ in range(2):
                self.assertOk(name(svc))
        # Through instance A: A answers at once, B once Redis's message arrives.
        self.assertOk(self.update(c['owner'], eid, [c['owner'].address], name='Via A'))
        self.assertEqual(self.assertOk(name(self.a))['data']['name'], 'Via A')
        self.eventually(lambda: name(self.b), lambda r: r[0] == 200 and
                        r[2]['data']['name'] == 'Via A', 'instance B seeing the update')
        # A raw write to Redis by another client.
        stored = json.loads(rcli(self.r, 'HGET', ekey(eid), 'json'))
        stored['name'] = 'Raw'
        rcli(self.r, 'HSET', ekey(eid), 'json', json.dumps(stored))
        for svc in (self.a, self.b):
            self.eventually(lambda: name(svc), lambda r: r[0] == 200 and
                            r[2]['data']['name'] == 'Raw', 'the raw write')
        # Members: a page cached on B, members added through A.
        for _ in range(2):
            self.assertEqual(self.assertOk(self.users(eid, c['reader'], port=self.b.port))
                             ['users'], [])
        added = rand_addr()
        self.assertOk(self.force_add(eid, c['owner'], [added]))
        self.eventually(lambda: self.users(eid, c['reader'], port=self.b.port),
                        lambda r: r[0] == 200 and [u['address'] for u in r[2]['users']] ==
                        [added], 'instance B seeing the new member')
        # Made private through A: B refuses the reader (no role) once it hears.
        self.assertOk(self.update(c['owner'], eid, [c['owner'].address], public=False))
        self.eventually(lambda: name(self.b), lambda r: r[0] == 403, 'instance B refusing')
        # A revocation through A: B refuses the revoked signature once it hears.
        v = c['revoked']
        self.assertOk(self.update(c['owner'], eid, [c['owner'].address], public=True))
        for _ in range(2):
            self.eventually(lambda: self.get_entity(eid, v, port=self.b.port),
                            lambda r: r[0] == 200, 'the signature accepted on B')
        st, _, body = self.req('POST', '/api/auth/revoke?' + v.q)
        self.assertEqual(st, 200, body)
        self.eventually(lambda: self.get_entity(eid, v, port=self.b.port),
                        lambda r: r[0] == 401, 'instance B refusing the revoked signature')
        # A flush of the whole database: nothing cached survives it.
        for _ in range(2):
            self.assertOk(name(self.b))
        rcli(self.r, 'FLUSHALL')
        for svc in (self.a, self.b):
            self.eventually(lambda: name(svc), lambda r: r[0] == 404, 'the flush')

    def test_cache_off_while_invalidations_cannot_arrive(self):
        c = self.c
        eid = self.create(c['owner'])['id']
        for _ in range(2):
            self.assertOk(self.get_entity(eid, c['reader'], port=self.b.port))
        # Kill every subscriber connection: the instances' invalidation connections. A write
        # made while they are down reaches no one; the caches must not keep their answers.
        def subscribers():
            return set(re.findall(r'^id=(\d+) ', rcli(self.r, 'CLIENT', 'LIST', 'TYPE', 'pubsub'),
                                  re.M))
        # Under valgrind a heartbeat can come back late and an instance reconnect its
        # subscriber: wait until both are connected and on, rather than count once.
        def both_listening():
            return len(subscribers()) == 2 and all(
                read_cache_metrics(svc.port).get('entityd_read_cache_enabled') == 1
                for svc in (self.a, self.b))
        harness.wait_for(both_listening, scaled(10), what='both invalidation connections up')
        old = subscribers()
        self.assertEqual(len(old), 2, old)
        rcli(self.r, 'CLIENT', 'KILL', 'TYPE', 'pubsub')
        self.assertOk(self.update(c['owner'], eid, [c['owner'].address], name='Unheard'))
        # Both back (which each does only after seeing its connection go), and on again.
        harness.wait_for(lambda: len(subscribers() - old) == 2, scaled(10),
                         what='both invalidation connections back')
        for svc in (self.a, self.b):
            harness.wait_for(lambda: read_cache_metrics(svc.port).get(
                'entityd_read_cache_enabled') == 1, scaled(10), what='read cache on again')
        resp = self.get_entity(eid, c['reader'], port=self.b.port)
        self.assertEqual(self.assertOk(resp)['data']['name'], 'Unheard')
        # Redis restarted: the main connection's tracking is gone too; on again afterwards,
        # and what changed meanwhile is read.
        for _ in range(2):
            self.assertOk(self.get_entity(eid, c['reader'], port=self.b.port))
        self.r.restart()
        self.eventually(lambda: self.update(c['owner'], eid, [c['owner'].address],
                                            name='After restart'),
                        lambda r: r[0] == 200, 'the update once A is back')
        for svc in (self.a, self.b):
            harness.wait_for(lambda: read_cache_metrics(svc.port).get(
                'entityd_read_cache_enabled') == 1, scaled(10), what='read cache on again')
        self.eventually(lambda: self.get_entity(eid, c['reader'], port=self.b.port),
                        lambda r: r[0] == 200 and r[2]['data']['name'] == 'After restart',
                        'instance B reading the change made across the restart')

    def test_silent_invalidation_connection_turns_the_cache_off(self):
        """Connections that stay open but deliver nothing (a proxy holding every reply back
        4.5 s): the heartbeat stops coming back within 3 s and the cache goes off; once
        replies flow again it comes back on."""
        proxy = FaultProxy(self.r).start()
        self.addCleanup(proxy.stop)
        svc = self.entityd(redis=None, env={'REDIS_URL': proxy.url})
        enabled = lambda: read_cache_metrics(svc.port).get('entityd_read_cache_enabled')
        harness.wait_for(lambda: enabled() == 1, scaled(10), what='read cache on')
        proxy.delay(4500)
        try:
            harness.wait_for(lambda: enabled() == 0, scaled(15), what='read cache off')
        finally:
            proxy.release()
        self.assertTrue(any(l.get('msg') == 'read cache off' and 'silent' in l.get('detail', '')
                            for l in svc.logs()), svc.stdout()[-2000:])
        harness.wait_for(lambda: enabled() == 1, scaled(30), what='read cache on again')


class AliasRaceAcrossInstancesTest(EntityCase):
    """Two instances on one Redis claiming the same alias. Instance A reaches Redis through a
    proxy that holds its replies back, so its claim is taken but its entity write is still on
    the way when instance B, direct, asks for the same alias."""

    def setUp(self):
        super().setUp()
        self.r = self.redis()
        self.proxy = FaultProxy(self.r, record=True).start()
        self.addCleanup(self.proxy.stop)
        # The read cache off behind the proxy: it holds back every reply chunk in turn, and the
        # cache's heartbeat replies would queue ahead of the claim's.
        self.slow = self.entityd(redis=None, env={'REDIS_URL': self.proxy.url,
                                                  'READ_CACHE_MB': '0'})
        self.fast = self.entityd(redis=self.r)
        self.c = make_callers(self.fast.port, ('a', 'b'))
        # Warm both signatures on both instances (recovery cached).
        for svc in (self.slow, self.fast):
            for who in ('a', 'b'):
                self.assertError(self.get_entity(new_entity_id(), self.c[who], port=svc.port),
                                 404, 'not_found')

    def race(self, alias, slow_call, fast_call):
        """Runs slow_call on instance A; once A's claim of alias reached Redis, fast_call on
        instance B. Returns (slow response, fast response)."""
        key = alias_key(alias).encode()
        m = self.proxy.mark()
        self.proxy.delay(scaled(500))
        out = {}

        def run_slow():
            out['slow'] = slow_call()

        t = threading.Thread(target=run_slow, daemon=True)
        t.start()
        try:
            harness.wait_for(lambda: any(e[1] == 'cmd' and key in e[2] for e in
                                         self.proxy.since(m)),
                             scaled(10), what='instance A claiming %s' % alias)
            out['fast'] = fast_call()
        finally:
            t.join(scaled(30))
            self.proxy.release()
        self.assertFalse(t.is_alive())
        return out['slow'], out['fast']

    def test_concurrent_create_claims_on_two_instances(self):
        a, b = self.c['a'], self.c['b']
        alias = 'dual-' + rand_tag()
        slow, fast = self.race(
            alias,
            lambda: self.post_entity(a, self.body([a.address], communityURLAlias=alias),
                                     port=self.slow.port),
            lambda: self.post_entity(b, self.body([b.address], communityURLAlias=alias),
                                     port=self.fast.port))
        holders = sorted(e for e in entity_ids(self.r)
                         if rcli(self.r, 'HGET', ekey(e), 'communityURLAlias') == alias)
        self.assertEqual(sorted([slow[0], fast[0]]), [201, 409],
                         'instance A (claim first): %s, instance B: %s; entities naming the '
                         'alias: %d; alias key -> %s' %
                         (slow[0], fast[0], len(holders), alias_holder(self.r, alias)))
        self.assertEqual(len(holders), 1)
        self.assertEqual(alias_holder(self.r, alias), holders[0])

    def test_concurrent_update_claims_on_two_instances(self):
        a, b = self.c['a'], self.c['b']
        ea = self.create(a, port=self.fast.port, communityURLAlias='old-a-' + rand_tag())['id']
        eb = self.create(b, port=self.fast.port, communityURLAlias='old-b-' + rand_tag())['id']
        alias = 'dual-' + rand_tag()
        slow, fast = self.race(
            alias,
            lambda: self.update(a, ea, [a.address], communityURLAlias=alias, port=self.slow.port),
            lambda: self.update(b, eb, [b.address], communityURLAlias=alias, port=self.fast.port))
        holders = sorted(e for e in (ea, eb)
                         if rcli(self.r, 'HGET', ekey(e), 'communityURLAlias') == alias)
        self.assertEqual(sorted([slow[0], fast[0]]), [200, 409],
                         'instance A (claim first): %s, instance B: %s; entities naming the '
                         'alias: %d; alias key -> %s' %
                         (slow[0], fast[0], len(holders), alias_holder(self.r, alias)))
        self.assertEqual(len(holders), 1)
        self.assertEqual(alias_holder(self.r, alias), holders[0])


class PlatformCreationTest(EntityCase):
    """ENTITY_CREATION=platform."""

    def test_entity_creation_platform_only(self):
        r = self.redis()
        wallets = harness.Wallet.random(3)
        svc = self.entityd(redis=r, env={'ENTITY_CREATION': 'platform',
                                         'PLATFORM_ADMINS': '%s, %s' % (rand_addr(),
                                                                        wallets[0].address)})
        self.port = svc.port
        message, _ = harness.current_message(self.port)
        sigs = sign_wallets(wallets, message)
        platform, owner, stranger = [Caller(w, sigs[w.address], role) for w, role in
                                     zip(wallets, ('platform', 'owner', 'stranger'))]
        for who in (owner, stranger):
            self.assertError(self.post_entity(who, self.body([who.address])), 403, 'forbidden')
            self.assertError(self.post_entity(who, self.body([who.address], isEnabled=True)),
                             403, 'forbidden')
        self.assertError(self.post_entity(owner.aq, self.body([owner.address])), 401,
                         'unauthenticated')
        self.assertEqual(entity_ids(r), set())
        ent = self.create(platform, owners=[owner.address])
        self.assertEqual(ent['ownerAddress'], sorted([owner.address, platform.address]))
        self.assertEqual(rcli(r, 'HGET', ekey(ent['id']), 'createdBy'), platform.address)
        self.assertEqual(entity_ids(r), {ent['id']})
        # Owners still update (an update is not a creation); isEnabled stays platform-only.
        up = self.assertOk(self.update(owner, ent['id'], [owner.address, platform.address],
                                       name='Owned'))['data']
        self.assertEqual((up['name'], up['__v']), ('Owned', 1))
        self.assertError(self.update(owner, ent['id'], [owner.address], isEnabled=False), 403,
                         'forbidden')
        self.assertError(self.update(stranger, ent['id'], [owner.address]), 403, 'forbidden')
        up = self.assertOk(self.update(platform, ent['id'], [owner.address],
                                       isEnabled=False))['data']
        self.assertIs(up['isEnabled'], False)


class CrashTest(EntityCase):
    """SIGKILL while 20 clients write: no half-applied write is left in Redis."""

    N_ENTITIES = 5
    N_CLIENTS = 20

    def test_sigkill_during_writes_leaves_no_half_applied_write(self):
        r = self.redis()
        svc = self.entityd(redis=r)
        self.port = port = svc.port
        c = make_callers(port, ('owner', 'owner2'))
        owners = sorted([c['owner'].address, c['owner2'].address])
        tag = rand_tag(6)
        ents = []
        for i in range(self.N_ENTITIES):
            ents.append(self.create(c['owner'], owners=owners,
                                    communityURLAlias='k%s-e%d' % (tag, i))['id'])
        lock = threading.Lock()
        sent = []  # dicts: kind, entity, data, status (None: no answer)
        stop = threading.Event()

        def worker(t):
            eid = ents[t % self.N_ENTITIES]
            n = 0
            while not stop.is_set():
                kind = ('force', 'update', 'admins')[(t + n) % 3]
                rec = {'kind': kind, 'entity': eid, 'status': None}
                if kind == 'force':
                    rec['data'] = [rand_addr() for _ in range(50)]
                    method, path = 'POST', '/api/entities/%s/force-add?%s' % (eid, c['owner'].q)
                    body = {'addresses': rec['data'], 'Chain': 'ETH'}
                elif kind == 'update':
                    rec['data'] = 'k%s-e%d-t%d-n%d' % (tag, ents.index(eid), t, n)
                    method, path = 'POST', '/api/entities?' + c['owner2'].q
                    body = self.body(owners, id=eid, communityURLAlias=rec['data'],
                                     name='crash %d %d' % (t, n))
                else:
                    rec['data'] = [rand_addr() for _ in range(3)]
                    method, path = 'POST', '/api/entities/%s/admins?%s' % (eid, c['owner'].q)
                    body = {'addresses': rec['data']}
                with lock:
                    sent.append(rec)
                try:
                    st, _, resp = harness.request(port, method, path, body=body,
                                                  timeout=scaled(10))
                except (OSError, http.client.HTTPException):
                    return
                rec['status'] = st
                rec['body'] = resp
                n += 1

        threads = [threading.Thread(target=worker, args=(t,), daemon=True)
                   for t in range(self.N_CLIENTS)]
        for t in threads:
            t.start()
        try:
            def acked():
                with lock:
                    return sum(1 for s in sent if s['status'] == 200) >= 200
            harness.wait_for(acked, scaled(30), what='200 acknowledged writes')
            svc.kill()  # SIGKILL by PID, mid-traffic
        finally:
            stop.set()
            for t in threads:
                t.join(scaled(30))
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertFalse(svc.alive())
        answered = [s for s in sent if s['status'] is not None]
        self.assertTrue(all(s['status'] == 200 for s in answered),
                        [(s['kind'], s['status'], s.get('body')) for s in answered
                         if s['status'] != 200][:5])
        unanswered = [s for s in sent if s['status'] is None]
        self.assertTrue(unanswered, 'no write was in flight at the kill')

        problems = []
        self.assertEqual(entity_ids(r), set(ents))
        alias_holders = {}
        for i, eid in enumerate(ents):
            stored = hgetall(r, ekey(eid))
            problems += ['%s: %s' % (eid, p) for p in check_stored_entity(stored)]
            own = sorted(rcli(r, 'SMEMBERS', ekey(eid, ':owners')))
            if own != owners:
                problems.append('%s: owners %s' % (eid, own))
            mine = [s for s in sent if s['entity'] == eid]
            ups = [s for s in mine if s['kind'] == 'update']
            acked_ups = sum(1 for s in ups if s['status'] == 200)
            v = int(stored.get('__v', -1))
            if not acked_ups <= v <= len(ups):
                problems.append('%s: __v %d, %d updates acknowledged, %d sent' %
                                (eid, v, acked_ups, len(ups)))
            # Members: hash and order agree entry by entry; each batch all or nothing.
            records, order = members_state(r, eid)
            order_map = {}
            for added, a in order:
                if a in order_map:
                    problems.append('%s: %s twice in the order' % (eid, a))
                order_map[a] = added
            if set(records) != set(order_map):
                problems.append('%s: members hash and order differ by %d entries' %
                                (eid, len(set(records) ^ set(order_map))))
            for a, (added, chain, by) in records.items():
                if a in order_map and order_map[a] != added:
                    problems.append('%s: %s addedAt %s vs order %s' % (eid, a, added,
                                                                       order_map[a]))
            for s in mine:
                if s['kind'] not in ('force', 'admins'):
                    continue
                have = (set(records) if s['kind'] == 'force' else
                        set(rcli(r, 'SMEMBERS', ekey(eid, ':admins'))))
                n = sum(1 for a in s['data'] if a in have)
                if n not in (0, len(s['data'])) or (s['status'] == 200 and n != len(s['data'])):
                    problems.append('%s: %s batch (status %s) applied %d of %d' %
                                    (eid, s['kind'], s['status'], n, len(s['data'])))
            alias = stored.get('communityURLAlias', '')
            if alias:
                if alias in alias_holders:
                    problems.append('alias %s held by %s and %s' % (alias, alias_holders[alias],
                                                                    eid))
                alias_holders[alias] = eid
                key_holder = alias_holder(r, alias)
                if key_holder != eid:
                    problems.append('%s: alias %s but its key -> %r' % (eid, alias, key_holder))
        # Every alias key points at an existing entity: live (its record names the alias) or a
        # stale claim (its record names another), never at nothing.
        stale = 0
        for k in scan_keys(r, 'alias:{*}'):
            holder = alias_holder(r, k[len('alias:{'):-1])
            if holder not in ents:
                problems.append('%s -> %r, not an entity' % (k, holder))
            elif hgetall(r, ekey(holder)).get('communityURLAlias') != k[len('alias:{'):-1]:
                stale += 1
        self.assertEqual(problems, [], problems[:10])

        # A new instance serves the same data.
        svc2 = self.entityd(redis=r)
        self.port = svc2.port
        for eid in ents:
            ent = self.assertOk(self.get_entity(eid, c['owner']))['data']
            self.assertEntityShape(ent)
            self.assertEqual(ent['__v'], int(rcli(r, 'HGET', ekey(eid), '__v')))
            users, _ = self.all_users(eid, c['owner'], 1000)
            self.assertEqual(len(users), rcli(r, 'HLEN', ekey(eid, ':members')))
            keys = [(u['addedAt'], u['address']) for u in users]
            self.assertEqual(keys, sorted(keys))
            self.assertEqual(len(set(u['address'] for u in users)), len(users))


if __name__ == '__main__':
    harness.main()
