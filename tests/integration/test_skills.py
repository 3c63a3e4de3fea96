"""Skills and levels API (CONTRACT section 3, endpoints 5-8): reads, one or several skills, level
upserts; roles, validation fields, unique names under concurrency, level ordering, endsAt and XP
edge cases, the race between level updates and skill creation, and Redis round trips."""

import datetime
import http.client
import json
import os
import random
import re
import socket
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402

SKILL_ID = re.compile(r'^s-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')
ISO_MS = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$')
SKILL_FIELDS = {'id', 'entityID', 'name', 'description', 'createdAt', 'createdBy', 'parentId',
                'depth'}
LEVEL_FIELDS = {'id', 'entityID', 'name', 'description', 'skillIds', 'scores', 'requires',
                'endsAt', 'XP', 'createdAt', 'modifiedAt'}
XP_MAX = 2 ** 53 - 1
WALLETS = 160


def fabricated_skill_id(rng=None):
    """A well-formed skill id that no skill has (random UUIDv4)."""
    if rng is None:
        return 's-' + str(uuid.uuid4())
    return 's-' + str(uuid.UUID(int=rng.getrandbits(128), version=4))


def unknown_entity_id():
    return 'c-' + str(uuid.uuid4())


def parse_iso(s):
    return datetime.datetime.strptime(s, '%Y-%m-%dT%H:%M:%S.%fZ').replace(
        tzinfo=datetime.timezone.utc)


def iso_to_ms(s):
    return int(parse_iso(s).timestamp() * 1000 + 0.5)


def skills_key(eid, suffix=''):
    return 'ent:{%s}:skills%s' % (eid, suffix)


def levels_key(eid, suffix=''):
    return 'ent:{%s}:levels%s' % (eid, suffix)


class Monitor:
    """A Redis MONITOR connection: the commands Redis executed, clients' and scripts' apart."""

    def __init__(self, port):
        self.port = port
        self.sock = socket.create_connection(('127.0.0.1', port), timeout=scaled(5))
        self.buf = b''
        self.sock.sendall(b'MONITOR\r\n')
        first = self._line()
        assert first == '+OK', first

    def _line(self):
        while b'\r\n' not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('MONITOR connection closed')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\r\n', 1)
        return line.decode(errors='replace')

    def collect(self):
        """Every command line up to a sentinel ECHO sent now (the sentinel excluded)."""
        token = 'skills-sentinel-%s' % uuid.uuid4().hex
        harness.resp_command(self.port, 'ECHO', token)
        lines = []
        deadline = time.monotonic() + scaled(5)
        while time.monotonic() < deadline:
            line = self._line()
            if token in line:
                return lines
            lines.append(line)
        raise TimeoutError('MONITOR sentinel not seen')

    @staticmethod
    def split(lines):
        """(client command names, script command names), lowercase."""
        clients, scripts = [], []
        for line in lines:
            m = re.match(r'^\+\d+\.\d+ \[(\d+) ([^\]]+)\] "([^"]*)"', line)
            if not m:
                continue
            (scripts if m.group(2) == 'lua' else clients).append(m.group(3).lower())
        return clients, scripts

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class SkillsTest(harness.ServiceTestCase):
    """One Redis and one entityd (with one platform admin) shared by the class; every test makes
    its own entities and wallets."""

    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(WALLETS)
        cls.platform = cls.pool.pop()
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r,
                                    env={'PLATFORM_ADMINS': cls.platform.address})
        cls.port = cls.svc.port
        cls.message, _ = harness.current_message(cls.port)
        cls._creds = {}

    # ------------------------------------------------------------------------------------
    # helpers

    def wallets(self, n):
        self.assertGreaterEqual(len(self.pool), n, 'raise WALLETS')
        return [self.pool.pop() for _ in range(n)]

    def creds(self, w):
        """(address, signature) of w over the current sign-in message (cached)."""
        c = self._creds.get(w.address)
        if c is None:
            c = self._creds[w.address] = w.sign(self.message)
        return c

    def auth(self, w, address=True):
        a, s = self.creds(w)
        return harness.auth_query(a if address else None, s)

    def raw_get(self, path):
        """The body bytes of a GET, undecoded."""
        conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=scaled(10))
        try:
            conn.request('GET', path)
            resp = conn.getresponse()
            data = resp.read()
            self.assertEqual(resp.status, 200, data)
            return data
        finally:
            conn.close()

    def req(self, method, path, body=None, headers=None):
        if isinstance(body, (str, bytes)) and headers is None:
            headers = {'Content-Type': 'application/json'}
        return harness.request(self.port, method, path, body=body, headers=headers,
                               timeout=scaled(10))

    def create_entity(self, owner, public=True, **extra):
        body = {'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': 'skills tests',
                'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
                'imageUrl': '', 'public': public}
        body.update(extra)
        body = self.assertOk(self.req('POST', '/api/entities?' + self.auth(owner), body), 201)
        eid = body['data']['id']
        self.assertTrue(eid.startswith('c-'), eid)
        return eid

    def add_admins(self, owner, eid, *admins):
        self.assertOk(self.req('POST', '/api/entities/%s/admins?%s' % (eid, self.auth(owner)),
                               {'addresses': [a.address for a in admins]}))

    def add_members(self, by, eid, *members):
        self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(by)),
                               {'addresses': [m.address for m in members], 'Chain': 'eth'}))

    def disable(self, eid, owner):
        body = {'name': 'Disabled guild', 'description': '', 'ownerAddresses': [owner.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'isEnabled': False}
        self.assertOk(self.req('POST', '/api/entities?entityID=%s&%s' %
                               (eid, self.auth(self.platform)), body))

    def roles(self, public=True):
        """A new entity and a dict of wallets: owner, admin, member, stranger."""
        owner, admin, member, stranger = self.wallets(4)
        eid = self.create_entity(owner, public=public)
        self.add_admins(owner, eid, admin)
        self.add_members(owner, eid, member)
        return eid, {'owner': owner, 'admin': admin, 'member': member, 'stranger': stranger}

    def get_skills(self, w, eid, path='/api/skills', address=True):
        return self.req('GET', '%s?entityID=%s&%s' % (path, eid, self.auth(w, address)))

    def post_skill(self, w, body, path='/api/skills', query=''):
        q = self.auth(w) + (('&' + query) if query else '')
        return self.req('POST', '%s?%s' % (path, q), body)

    def add_skill(self, w, eid, name, description=''):
        body = self.assertOk(self.post_skill(w, {'name': name, 'description': description,
                                                 'entityID': eid}), 201)
        return body['data']

    def add_skills(self, w, eid, names):
        body = self.assertOk(self.post_skill(w, {'names': names, 'entityID': eid},
                                             '/api/skills/multiple'), 201)
        return [s['id'] for s in body['data']]

    def level_path(self, eid, lvid, query):
        return '/api/entities/%s/levels/%s/update?%s' % (eid, lvid, query)

    def put_level(self, w, eid, lvid, body, address=True):
        return self.req('POST', self.level_path(eid, lvid, self.auth(w, address)), body)

    def level_body(self, skill_ids=(), scores=None, **kw):
        body = {'name': 'Level', 'description': 'a level', 'skillIds': list(skill_ids),
                'scores': list(scores) if scores is not None else [1] * len(skill_ids),
                'endsAt': '', 'XP': 0}
        body.update(kw)
        return body

    def hlen(self, key):
        return self.r.cli('HLEN', key)

    def skill_count(self, eid):
        return self.hlen(skills_key(eid))

    def assertSkill(self, s, eid, name, description, created_by):
        self.assertEqual(set(s), SKILL_FIELDS, s)
        self.assertRegex(s['id'], SKILL_ID)
        self.assertEqual(s['entityID'], eid)
        self.assertEqual(s['name'], name)
        self.assertEqual(s['description'], description)
        self.assertRegex(s['createdAt'], ISO_MS)
        self.assertEqual(s['createdBy'], created_by.lower())

    def assertLevel(self, lv, eid, lvid):
        self.assertEqual(set(lv), LEVEL_FIELDS, lv)
        self.assertEqual(lv['id'], lvid)
        self.assertEqual(lv['entityID'], eid)
        self.assertIsInstance(lv['name'], str)
        self.assertIsInstance(lv['description'], str)
        self.assertIsInstance(lv['skillIds'], list)
        self.assertIsInstance(lv['scores'], list)
        self.assertEqual(len(lv['skillIds']), len(lv['scores']), lv)
        for x in lv['scores']:
            self.assertIs(type(x), int, lv)
        self.assertIs(type(lv['XP']), int, lv)
        self.assertTrue(lv['endsAt'] is None or ISO_MS.match(lv['endsAt']), lv)
        self.assertRegex(lv['createdAt'], ISO_MS)
        self.assertRegex(lv['modifiedAt'], ISO_MS)

    def assertError(self, resp, status, code, field=None):
        """The error envelope; field None means: not checked (see assertEnvelope for absent)."""
        st, headers, body = resp
        self.assertEqual(st, status, 'status %s, body %r' % (st, body))
        self.assertIsInstance(body, dict, body)
        self.assertIs(body.get('success'), False, body)
        self.assertEqual(body.get('error', {}).get('code'), code, body)
        if field is not None:
            self.assertEqual(body['error'].get('field'), field, body)
        return body['error']

    # ------------------------------------------------------------------------------------
    # GET /api/skills

    def test_get_empty_entity_exact_shape_and_path_forms(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        for path in ('/api/skills', '/api//skills', '/api/skills/'):
            st, headers, body = self.get_skills(owner, eid, path)
            self.assertEqual(st, 200, (path, body))
            self.assertTrue(headers['content-type'].startswith('application/json'))
            self.assertEqual(body, {'success': True,
                                    'data': {'entityID': eid, 'skills': [], 'levels': []}},
                             path)

    def test_get_read_rule_public_entity(self):
        eid, w = self.roles(public=True)
        for role in ('owner', 'admin', 'member', 'stranger'):
            body = self.assertOk(self.get_skills(w[role], eid))
            self.assertEqual(body['data']['entityID'], eid, role)
        self.assertOk(self.get_skills(self.platform, eid))
        # Unsigned (address alone): 401 even on a public entity.
        self.assertEnvelope(self.req('GET', '/api/skills?entityID=%s&address=%s' %
                                     (eid, w['owner'].address)), 401, 'unauthenticated')
        # A signature that is not the address's.
        _, sig = self.creds(w['stranger'])
        self.assertEnvelope(self.req('GET', '/api/skills?entityID=%s&address=%s&signature=%s' %
                                     (eid, w['owner'].address, sig)), 401, 'unauthenticated')

    def test_get_read_rule_private_entity(self):
        eid, w = self.roles(public=False)
        self.add_skill(w['owner'], eid, 'Secret skill')
        for who in (w['owner'], w['admin'], w['member'], self.platform):
            body = self.assertOk(self.get_skills(who, eid))
            self.assertEqual([s['name'] for s in body['data']['skills']], ['Secret skill'])
        self.assertEnvelope(self.get_skills(w['stranger'], eid), 403, 'forbidden')
        self.assertEnvelope(self.req('GET', '/api/skills?entityID=%s&address=%s' %
                                     (eid, w['member'].address)), 401, 'unauthenticated')

    def test_disabled_entity_reads_and_writes(self):
        eid, w = self.roles(public=True)
        sid = self.add_skill(w['owner'], eid, 'Before')['id']
        self.disable(eid, w['owner'])
        # Reads: 404 to all but owners and platform admins.
        for role in ('admin', 'member', 'stranger'):
            self.assertEnvelope(self.get_skills(w[role], eid), 404, 'not_found')
        for who in (w['owner'], self.platform):
            body = self.assertOk(self.get_skills(who, eid))
            self.assertEqual([s['id'] for s in body['data']['skills']], [sid])
        # Writes: 403 for owners and admins, 404 for the rest; platform admins may.
        for role, status, code in (('owner', 403, 'forbidden'), ('admin', 403, 'forbidden'),
                                   ('member', 404, 'not_found'),
                                   ('stranger', 404, 'not_found')):
            self.assertEnvelope(self.post_skill(w[role], {'name': 'X ' + role, 'entityID': eid}),
                                status, code)
            self.assertEnvelope(self.post_skill(w[role], {'names': ['Y ' + role],
                                                          'entityID': eid},
                                                '/api/skills/multiple'), status, code)
            self.assertEnvelope(self.put_level(w[role], eid, 'lv-' + role,
                                               self.level_body([sid])), status, code)
        self.assertEqual(self.skill_count(eid), 1)
        self.assertEqual(self.hlen(levels_key(eid)), 0)
        self.assertOk(self.post_skill(self.platform, {'name': 'By platform', 'entityID': eid}),
                      201)
        self.assertOk(self.put_level(self.platform, eid, 'lv-p', self.level_body([sid])), 201)

    def test_get_entity_id_errors(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        q = self.auth(owner)
        self.assertEnvelope(self.req('GET', '/api/skills?' + q), 400, 'invalid_request',
                            field='entityID')
        bad = ('', 'c-123', eid.upper(), eid.replace('c-', 's-'), eid + '0', eid[:-1],
               'c-' + str(uuid.uuid1()))
        for b in bad:
            self.assertEnvelope(self.req('GET', '/api/skills?entityID=%s&%s' % (b, q)), 400,
                                'invalid_request', field='entityID')
        self.assertEnvelope(self.req('GET', '/api/skills?entityID=%s&%s' %
                                     (unknown_entity_id(), q)), 404, 'not_found')
        # A repeated parameter is invalid_request.
        self.assertError(self.req('GET', '/api/skills?entityID=%s&entityID=%s&%s' %
                                  (eid, eid, q)), 400, 'invalid_request')

    def test_get_lists_skills_by_creation_and_batches_in_request_order(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        made = []
        for name in ('zulu', 'alpha', 'mike'):
            made.append(self.add_skill(owner, eid, name)['id'])
            time.sleep(0.003)  # distinct createdAt: creation order is then the only order
        made += self.add_skills(owner, eid, ['yankee', 'bravo', 'xray', 'charlie'])
        time.sleep(0.003)
        made.append(self.add_skill(owner, eid, 'delta')['id'])
        body = self.assertOk(self.get_skills(owner, eid))
        skills = body['data']['skills']
        self.assertEqual([s['id'] for s in skills], made)
        self.assertEqual([s['name'] for s in skills],
                         ['zulu', 'alpha', 'mike', 'yankee', 'bravo', 'xray', 'charlie', 'delta'])
        times = [iso_to_ms(s['createdAt']) for s in skills]
        self.assertEqual(times, sorted(times))
        for s in skills:
            self.assertSkill(s, eid, s['name'], '', owner.address)

    def test_sequential_creations_listed_in_creation_order(self):
        """Requests answered one after another are listed in that order, also when several
        fall in one millisecond (equal createdAt): ties must not fall back to the random id,
        and two batches must not interleave."""
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        c = harness.Client(self.port, timeout=scaled(10))
        self.addCleanup(c.close)
        q = self.auth(owner)
        made = []
        for i in range(60):
            st, _, body = c.request('POST', '/api/skills?' + q,
                                    {'name': 'seq-%03d' % i, 'entityID': eid})
            self.assertEqual(st, 201, body)
            made.append(body['data']['name'])
        for b in range(20):
            names = ['batch-%02d-%d' % (b, k) for k in range(3)]
            st, _, body = c.request('POST', '/api/skills/multiple?' + q,
                                    {'names': names, 'entityID': eid})
            self.assertEqual(st, 201, body)
            made += [s['name'] for s in body['data']]
        st, _, body = c.request('GET', '/api/skills?entityID=%s&%s' % (eid, q))
        self.assertEqual(st, 200, body)
        got = [s['name'] for s in body['data']['skills']]
        self.assertEqual(sorted(got), sorted(made))
        pos = {name: i for i, name in enumerate(made)}
        inversions = [(got[i], got[i + 1]) for i in range(len(got) - 1)
                      if pos[got[i]] > pos[got[i + 1]]]
        self.assertFalse(inversions, '%d adjacent pairs of %d skills listed against '
                         'creation order (later one first), e.g. %r' %
                         (len(inversions), len(made), inversions[:4]))

    # ------------------------------------------------------------------------------------
    # POST /api/skills (one)

    def test_create_skill_exact_shape_and_stored(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        t0 = int(time.time() * 1000)
        # Uppercase hex is accepted as is; createdBy is lowercase.
        upper = '0x' + owner.address[2:].upper()
        _, sig = self.creds(owner)
        body = self.assertOk(self.req('POST', '/api/skills?address=%s&signature=%s' %
                                      (upper, sig),
                                      {'name': '  Solidity  ', 'description': ' Smart\tcontracts\n',
                                       'entityID': eid, 'ignored': [1, 2]}), 201)
        t1 = int(time.time() * 1000)
        self.assertEqual(set(body), {'success', 'data'})
        s = body['data']
        self.assertSkill(s, eid, 'Solidity', ' Smart\tcontracts\n', owner.address)
        self.assertGreaterEqual(iso_to_ms(s['createdAt']), t0 - 1000)
        self.assertLessEqual(iso_to_ms(s['createdAt']), t1 + 1000)
        got = self.assertOk(self.get_skills(owner, eid))['data']
        self.assertEqual(got['skills'], [s])
        self.assertEqual(self.skill_count(eid), 1)
        self.assertEqual(self.r.cli('HGET', skills_key(eid, ':names'), 'solidity'),
                         s['id'].encode())

    def test_create_skill_roles(self):
        eid, w = self.roles()
        for role in ('member', 'stranger'):
            self.assertEnvelope(self.post_skill(w[role], {'name': 'by ' + role,
                                                          'entityID': eid}), 403, 'forbidden')
        self.assertEnvelope(self.req('POST', '/api/skills?address=%s' % w['owner'].address,
                                     {'name': 'unsigned', 'entityID': eid}),
                            401, 'unauthenticated')
        self.assertEqual(self.skill_count(eid), 0)
        for who in (w['admin'], w['owner'], self.platform):
            s = self.assertOk(self.post_skill(who, {'name': 'by ' + who.address,
                                                    'entityID': eid}), 201)['data']
            self.assertEqual(s['createdBy'], who.address)
        self.assertEqual(self.skill_count(eid), 3)
        self.assertEnvelope(self.post_skill(w['owner'], {'name': 'x',
                                                         'entityID': unknown_entity_id()}),
                            404, 'not_found')

    def test_create_skill_validation_fields(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        ok = {'name': 'Rust', 'description': 'systems', 'entityID': eid}
        cases = [
            ({'description': 'd', 'entityID': eid}, 'name'),
            (dict(ok, name=''), 'name'),
            (dict(ok, name='  \t '), 'name'),
            (dict(ok, name='n' * 101), 'name'),
            (dict(ok, name='\u00e9' * 101), 'name'),
            (dict(ok, name=42), 'name'),
            (dict(ok, name=None), 'name'),
            (dict(ok, name=['Rust']), 'name'),
            (dict(ok, name='bad\x01name'), 'name'),
            (dict(ok, name='two\nlines'), 'name'),
            (dict(ok, description='d' * 5001), 'description'),
            (dict(ok, description=7), 'description'),
            (dict(ok, description='bell\x07'), 'description'),
            ({'name': 'Rust'}, 'entityID'),
            (dict(ok, entityID=''), 'entityID'),
            (dict(ok, entityID=eid.upper()), 'entityID'),
            (dict(ok, entityID=5), 'entityID'),
            (dict(ok, entityID='s-' + eid[2:]), 'entityID'),
        ]
        for body, field in cases:
            with self.subTest(body=str(body)[:80]):
                self.assertEnvelope(self.post_skill(owner, body), 400, 'invalid_request',
                                    field=field)
        self.assertEnvelope(self.post_skill(owner, '{"name":'), 400, 'invalid_json')
        self.assertEnvelope(self.req('POST', '/api/skills?' + self.auth(owner), '[1]',
                                     {'Content-Type': 'application/json'}), 400, 'invalid_json')
        self.assertEqual(self.skill_count(eid), 0)
        # Boundaries that pass: 100 characters after trimming (multibyte counts as one), 5000.
        s = self.add_skill(owner, eid, '  ' + '\u00e9' * 100 + '  ', 'd' * 5000)
        self.assertEqual(s['name'], '\u00e9' * 100)
        self.assertEqual(len(s['description']), 5000)
        s = self.add_skill(owner, eid, 'n' * 100)
        self.assertEqual(s['name'], 'n' * 100)
        # description is optional: ''.
        s = self.assertOk(self.post_skill(owner, {'name': 'No description', 'entityID': eid}),
                          201)['data']
        self.assertEqual(s['description'], '')
        self.assertEqual(self.skill_count(eid), 3)

    def test_duplicate_names_conflict_and_nothing_added(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        first = self.add_skill(owner, eid, 'Solidity')
        for dup in ('Solidity', 'solidity', '  SOLIDITY ', '\tsOlIdItY\n'):
            self.assertEnvelope(self.post_skill(owner, {'name': dup, 'entityID': eid}),
                                409, 'conflict')
        self.assertEqual(self.skill_count(eid), 1)
        self.assertEqual(self.hlen(skills_key(eid, ':names')), 1)
        self.assertEqual(self.r.cli('ZCARD', skills_key(eid, ':order')), 1)
        # Only ASCII letters fold: a different non-ASCII case is another name.
        self.add_skill(owner, eid, '\u00c9clair')
        self.add_skill(owner, eid, '\u00e9clair')
        # Uniqueness is per entity.
        other = self.create_entity(owner)
        self.add_skill(owner, other, 'solidity')
        body = self.assertOk(self.get_skills(owner, eid))
        # (Order is the business of the ordering tests; these may share a millisecond.)
        self.assertEqual(sorted(s['name'] for s in body['data']['skills']),
                         sorted(['Solidity', '\u00c9clair', '\u00e9clair']))
        self.assertIn(first, body['data']['skills'])

    def test_twenty_concurrent_creations_of_one_name(self):
        owner, admin = self.wallets(2)
        eid = self.create_entity(owner)
        self.add_admins(owner, eid, admin)
        self.creds(admin)  # signed before the threads start
        n = 20
        spellings = ['Go', 'go', ' GO', 'gO ', 'go\t']
        barrier = threading.Barrier(n)
        results = [None] * n

        def run(i):
            who = owner if i % 2 else admin
            body = {'name': spellings[i % len(spellings)], 'entityID': eid}
            barrier.wait(timeout=scaled(10))
            try:
                results[i] = self.post_skill(who, body)
            except Exception as e:  # noqa: BLE001 - reported below
                results[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(scaled(30))
        self.assertFalse(any(t.is_alive() for t in threads))
        statuses = sorted(r[0] if isinstance(r, tuple) else repr(r) for r in results)
        self.assertEqual(statuses, [201] + [409] * (n - 1))
        for r in results:
            if r[0] == 409:
                self.assertEnvelope(r, 409, 'conflict')
        self.assertEqual(self.skill_count(eid), 1)
        self.assertEqual(self.hlen(skills_key(eid, ':names')), 1)
        self.assertEqual(self.r.cli('ZCARD', skills_key(eid, ':order')), 1)

    # ------------------------------------------------------------------------------------
    # several skills

    def test_multiple_three_forms(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        forms = [
            # /api/skills/multiple with JSON arrays
            ('/api/skills/multiple', '',
             {'names': ['zeta', 'alpha', 'mu'], 'descriptions': ['z', 'a', 'm'],
              'entityID': eid}),
            # ?multiple=true with strings holding JSON arrays
            ('/api/skills', 'multiple=true',
             {'names': json.dumps(['omega', 'beta']), 'descriptions': json.dumps(['o', 'b']),
              'entityID': eid}),
            # plain /api/skills whose body has names and no name
            ('/api/skills', '',
             {'names': ['kappa', 'gamma', 'iota', 'delta'],
              'descriptions': ['k', 'g', 'i', 'd'], 'entityID': eid}),
        ]
        expected = []
        for path, query, body in forms:
            with self.subTest(path=path, query=query):
                resp = self.assertOk(self.post_skill(owner, body, path, query), 201)
                self.assertEqual(set(resp), {'success', 'data'})
                names = body['names'] if isinstance(body['names'], list) else \
                    json.loads(body['names'])
                descs = body['descriptions'] if isinstance(body['descriptions'], list) else \
                    json.loads(body['descriptions'])
                data = resp['data']
                self.assertIsInstance(data, list)
                self.assertEqual([s['name'] for s in data], names)
                for s, name, d in zip(data, names, descs):
                    self.assertSkill(s, eid, name, d, owner.address)
                self.assertEqual(len({s['createdAt'] for s in data}), 1)
                self.assertEqual(len({s['id'] for s in data}), len(data))
                expected += data
            time.sleep(0.003)
        got = self.assertOk(self.get_skills(owner, eid))['data']['skills']
        self.assertEqual(got, expected)
        self.assertEqual(self.skill_count(eid), 9)

    def test_multiple_form_details(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        # descriptions may be left out: every description is ''.
        data = self.assertOk(self.post_skill(owner, {'names': ['a1', 'a2'], 'entityID': eid},
                                             '/api/skills/multiple'), 201)['data']
        self.assertEqual([(s['name'], s['description']) for s in data], [('a1', ''), ('a2', '')])
        # One item in the multiple form is still a list.
        data = self.assertOk(self.post_skill(owner, {'names': '["only"]', 'entityID': eid},
                                             query='multiple=true'), 201)['data']
        self.assertIsInstance(data, list)
        self.assertEqual([s['name'] for s in data], ['only'])
        # name present: the single form, even when names is given too.
        s = self.assertOk(self.post_skill(owner, {'name': 'single', 'names': ['ignored'],
                                                  'entityID': eid}), 201)['data']
        self.assertIsInstance(s, dict)
        self.assertEqual(s['name'], 'single')
        # 100 items pass.
        names = ['bulk-%03d' % i for i in range(100)]
        data = self.assertOk(self.post_skill(owner, {'names': names, 'entityID': eid},
                                             '/api/skills/multiple'), 201)['data']
        self.assertEqual([s['name'] for s in data], names)
        self.assertEqual(self.skill_count(eid), 104)

    def test_multiple_validation_fields(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        self.add_skill(owner, eid, 'existing')
        base = {'names': ['n0', 'n1', 'n2'], 'descriptions': ['d0', 'd1', 'd2'],
                'entityID': eid}
        cases = [
            (dict(base, descriptions=['d0', 'd1']), 'descriptions'),
            (dict(base, descriptions=['d0', 'd1', 'd2', 'd3']), 'descriptions'),
            (dict(base, descriptions=json.dumps(['d0'])), 'descriptions'),
            (dict(base, descriptions='d0,d1,d2'), 'descriptions'),
            (dict(base, descriptions=3), 'descriptions'),
            (dict(base, names=[]), 'names'),
            (dict(base, names='[]', descriptions='[]'), 'names'),
            (dict(base, names=['x%d' % i for i in range(101)],
                  descriptions=[''] * 101), 'names'),
            (dict(base, names='n0,n1,n2'), 'names'),
            (dict(base, names=5), 'names'),
            (dict(base, names={'a': 1}), 'names'),
            (dict(base, names='"n0"'), 'names'),
            (dict(base, names=['n0', '', 'n2']), 'names[1]'),
            (dict(base, names=['n0', '   ', 'n2']), 'names[1]'),
            (dict(base, names=['n0', 'x' * 101, 'n2']), 'names[1]'),
            (dict(base, names=['n0', 7, 'n2']), 'names[1]'),
            (dict(base, names=json.dumps(['n0', None, 'n2'])), 'names[1]'),
            (dict(base, names=['n0', 'n1', 'bad\x02']), 'names[2]'),
            (dict(base, descriptions=['d0', 'd1', 'd' * 5001]), 'descriptions[2]'),
            (dict(base, descriptions=['d0', 'd1', False]), 'descriptions[2]'),
            (dict(base, descriptions=['\x03', 'd1', 'd2']), 'descriptions[0]'),
            (dict(base, entityID='c-nope'), 'entityID'),
            ({'names': ['n0']}, 'entityID'),
        ]
        routes = [('/api/skills/multiple', ''), ('/api/skills', 'multiple=true'),
                  ('/api/skills', '')]
        for i, (body, field) in enumerate(cases):
            path, query = routes[i % len(routes)]
            with self.subTest(field=field, path=path, query=query, body=str(body)[:60]):
                self.assertEnvelope(self.post_skill(owner, body, path, query), 400,
                                    'invalid_request', field=field)
        # The explicit multiple forms require names.
        for path, query in routes[:2]:
            self.assertEnvelope(self.post_skill(owner, {'name': 'x', 'entityID': eid}, path,
                                                query), 400, 'invalid_request', field='names')
        self.assertEnvelope(self.post_skill(owner, {'names': ['x'],
                                                    'entityID': unknown_entity_id()},
                                            '/api/skills/multiple'), 404, 'not_found')
        self.assertEqual(self.skill_count(eid), 1)

    def test_multiple_duplicates_conflict_and_nothing_added(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        self.add_skill(owner, eid, 'Stored')
        names_key = skills_key(eid, ':names')
        for path, query, body in (
                ('/api/skills/multiple', '', {'names': ['new1', 'new2', ' stored ']}),
                ('/api/skills', 'multiple=true', {'names': '["new1", "STORED"]'}),
                ('/api/skills', '', {'names': ['new1', 'dup', 'new2', 'DUP']}),
                ('/api/skills/multiple', '', {'names': ['same', 'same']})):
            body['entityID'] = eid
            with self.subTest(body=body):
                self.assertEnvelope(self.post_skill(owner, body, path, query), 409, 'conflict')
                self.assertEqual(self.skill_count(eid), 1)
                self.assertEqual(self.hlen(names_key), 1)
                self.assertEqual(self.r.cli('ZCARD', skills_key(eid, ':order')), 1)
                self.assertEqual(self.r.cli('HEXISTS', names_key, 'new1'), 0)
        # The same names without the duplicate pass.
        self.add_skills(owner, eid, ['new1', 'new2', 'dup'])
        self.assertEqual(self.skill_count(eid), 4)

    def test_multiple_roles(self):
        eid, w = self.roles()
        body = {'names': ['m1', 'm2'], 'entityID': eid}
        for role in ('member', 'stranger'):
            self.assertEnvelope(self.post_skill(w[role], body, '/api/skills/multiple'), 403,
                                'forbidden')
            self.assertEnvelope(self.post_skill(w[role], body, query='multiple=true'), 403,
                                'forbidden')
        self.assertEnvelope(self.req('POST', '/api/skills/multiple?address=%s' %
                                     w['owner'].address, body), 401, 'unauthenticated')
        self.assertEqual(self.skill_count(eid), 0)
        for i, who in enumerate((w['admin'], w['owner'], self.platform)):
            data = self.assertOk(self.post_skill(who, {'names': ['r%d-a' % i, 'r%d-b' % i],
                                                       'entityID': eid},
                                                 '/api/skills/multiple'), 201)['data']
            self.assertEqual({s['createdBy'] for s in data}, {who.address})
        self.assertEqual(self.skill_count(eid), 6)

    # ------------------------------------------------------------------------------------
    # levels

    def test_level_create_then_update(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        a, b = self.add_skills(owner, eid, ['A', 'B'])
        t0 = int(time.time() * 1000)
        resp = self.put_level(owner, eid, 'gold_1-X', {
            'name': ' Gold ', 'description': 'The gold level', 'skillIds': [a, b],
            'scores': [10, 0], 'endsAt': '2027-01-01T10:00:00+02:00', 'XP': 1500})
        body = self.assertOk(resp, 201)
        self.assertEqual(set(body), {'success', 'data', 'created'})
        self.assertIs(body['created'], True)
        lv = body['data']
        self.assertLevel(lv, eid, 'gold_1-X')
        self.assertEqual(lv['name'], 'Gold')
        self.assertEqual(lv['description'], 'The gold level')
        self.assertEqual(lv['skillIds'], [a, b])
        self.assertEqual(lv['scores'], [10, 0])
        self.assertEqual(lv['endsAt'], '2027-01-01T08:00:00.000Z')
        self.assertEqual(lv['XP'], 1500)
        self.assertEqual(lv['createdAt'], lv['modifiedAt'])
        self.assertGreaterEqual(iso_to_ms(lv['createdAt']), t0 - 1000)
        got = self.assertOk(self.get_skills(owner, eid))['data']['levels']
        self.assertEqual(got, [lv])

        time.sleep(0.01)
        # description left out: kept. endsAt left out: kept too (an optional field left out
        # keeps its value, as on entity updates).
        body = self.assertOk(self.put_level(owner, eid, 'gold_1-X', {
            'name': 'Gold II', 'skillIds': [b], 'scores': [3], 'XP': '2000'}), 200)
        self.assertEqual(set(body), {'success', 'data', 'created'})
        self.assertIs(body['created'], False)
        lv2 = body['data']
        self.assertLevel(lv2, eid, 'gold_1-X')
        self.assertEqual(lv2['name'], 'Gold II')
        self.assertEqual(lv2['description'], 'The gold level')
        self.assertEqual(lv2['skillIds'], [b])
        self.assertEqual(lv2['scores'], [3])
        self.assertEqual(lv2['XP'], 2000)
        self.assertEqual(lv2['endsAt'], '2027-01-01T08:00:00.000Z')
        self.assertEqual(lv2['createdAt'], lv['createdAt'])
        self.assertNotEqual(lv2['modifiedAt'], lv['modifiedAt'])
        self.assertGreater(iso_to_ms(lv2['modifiedAt']), iso_to_ms(lv['modifiedAt']))

        time.sleep(0.01)
        # endsAt "" clears it; description given replaces it (also with "").
        body = self.assertOk(self.put_level(owner, eid, 'gold_1-X', {
            'name': 'Gold III', 'description': '', 'skillIds': [], 'scores': [], 'endsAt': '',
            'XP': 0}), 200)
        lv3 = body['data']
        self.assertEqual(lv3['description'], '')
        self.assertIsNone(lv3['endsAt'])
        self.assertEqual((lv3['skillIds'], lv3['scores'], lv3['XP']), ([], [], 0))
        self.assertEqual(lv3['createdAt'], lv['createdAt'])
        self.assertGreater(iso_to_ms(lv3['modifiedAt']), iso_to_ms(lv2['modifiedAt']))
        got = self.assertOk(self.get_skills(owner, eid))['data']
        self.assertEqual(got['levels'], [lv3])
        self.assertEqual(self.hlen(levels_key(eid)), 1)

    def test_concurrent_upserts_of_one_new_level(self):
        owner, admin = self.wallets(2)
        eid = self.create_entity(owner)
        self.add_admins(owner, eid, admin)
        sid = self.add_skill(owner, eid, 'c')['id']
        self.creds(admin)
        n = 12
        barrier = threading.Barrier(n)
        results = [None] * n

        def run(i):
            body = self.level_body([sid], [i], name='Level %d' % i, XP=i)
            barrier.wait(timeout=scaled(10))
            try:
                results[i] = self.put_level(owner if i % 2 else admin, eid, 'contended', body)
            except Exception as e:  # noqa: BLE001 - reported below
                results[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(scaled(30))
        self.assertFalse(any(t.is_alive() for t in threads))
        statuses = sorted(r[0] if isinstance(r, tuple) else repr(r) for r in results)
        self.assertEqual(statuses, [200] * (n - 1) + [201])
        created = [r for r in results if r[0] == 201]
        self.assertIs(created[0][2]['created'], True)
        first = created[0][2]['data']['createdAt']
        for r in results:
            self.assertIs(r[2]['created'], r[0] == 201)
            self.assertEqual(r[2]['data']['createdAt'], first)
        self.assertEqual(self.hlen(levels_key(eid)), 1)
        levels = self.assertOk(self.get_skills(owner, eid))['data']['levels']
        self.assertEqual(len(levels), 1)
        # The stored level is one whole request's (name, scores and XP from the same body).
        lv = levels[0]
        i = lv['XP']
        self.assertEqual((lv['name'], lv['scores']), ('Level %d' % i, [i]))

    def test_level_text_boundaries(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        lv = self.assertOk(self.put_level(owner, eid, 'b', self.level_body(
            name='\t' + 'n' * 100 + ' ', description='line 1\n\tline 2' + 'd' * 4986)),
            201)['data']
        self.assertEqual(lv['name'], 'n' * 100)
        self.assertEqual(len(lv['description']), 5000)
        self.assertTrue(lv['description'].startswith('line 1\n\tline 2'))

    def test_ends_at_outside_representable_years(self):
        """An endsAt whose UTC instant falls outside years 0000-9999 cannot be returned in the
        contract's format: it must be refused (400 endsAt), never returned as another
        instant."""
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        for i, given in enumerate(('9999-12-31T23:00:00-02:00', '0000-01-01T00:30:00+01:00')):
            with self.subTest(endsAt=given):
                resp = self.put_level(owner, eid, 'far-%d' % i, self.level_body(endsAt=given))
                if resp[0] in (200, 201):
                    self.fail('endsAt %r was accepted and returned as %r (a different instant)'
                              % (given, resp[2]['data']['endsAt']))
                self.assertEnvelope(resp, 400, 'invalid_request', field='endsAt')
        # The extremes that are representable pass unchanged.
        for i, given in enumerate(('9999-12-31T23:59:59.999Z', '0000-01-01T00:00:00.000Z',
                                   '1969-12-31T23:59:59.999Z')):
            lv = self.assertOk(self.put_level(owner, eid, 'edge-%d' % i,
                                              self.level_body(endsAt=given)), 201)['data']
            self.assertEqual(lv['endsAt'], given)

    def test_level_new_without_optional_fields(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        lv = self.assertOk(self.put_level(owner, eid, 'bare', {
            'name': 'Bare', 'skillIds': [], 'scores': [], 'XP': 5}), 201)['data']
        self.assertLevel(lv, eid, 'bare')
        self.assertEqual(lv['description'], '')
        self.assertIsNone(lv['endsAt'])

    def test_level_list_forms(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        ids = self.add_skills(owner, eid, ['s0', 's1', 's2'])
        forms = {
            'arrays': (ids, [5, 0, 7]),
            'array-of-strings-scores': (ids, ['5', '0', '7']),
            'json-strings': (json.dumps(ids), json.dumps([5, 0, 7])),
            'json-strings-of-strings': (json.dumps(ids), '["5","0","7"]'),
            'csv': (','.join(ids), '5,0,7'),
            'csv-spaced': (' , '.join(ids), ' 5 , 0 ,7 '),
            'mixed': (','.join(ids), [5, 0, 7]),
        }
        for i, (label, (sk, sc)) in enumerate(sorted(forms.items())):
            with self.subTest(form=label):
                lv = self.assertOk(self.put_level(owner, eid, 'form-%d' % i, {
                    'name': label, 'skillIds': sk, 'scores': sc, 'endsAt': '', 'XP': i}),
                    201)['data']
                self.assertEqual(lv['skillIds'], ids)
                self.assertEqual(lv['scores'], [5, 0, 7])
        # Empty lists in each form.
        for i, (sk, sc) in enumerate((([], []), ('[]', '[]'), ('', ''))):
            with self.subTest(empty=i):
                lv = self.assertOk(self.put_level(owner, eid, 'empty-%d' % i, {
                    'name': 'empty', 'skillIds': sk, 'scores': sc, 'XP': 1}), 201)['data']
                self.assertEqual((lv['skillIds'], lv['scores']), ([], []))
        levels = self.assertOk(self.get_skills(owner, eid))['data']['levels']
        self.assertEqual(len(levels), len(forms) + 3)
        for lv in levels:
            self.assertLevel(lv, eid, lv['id'])
            if lv['id'].startswith('form-'):
                self.assertEqual((lv['skillIds'], lv['scores']), (ids, [5, 0, 7]))
            else:
                self.assertEqual((lv['skillIds'], lv['scores']), ([], []))

    def test_level_validation_fields(self):
        owner, other_owner = self.wallets(2)
        eid = self.create_entity(owner)
        ids = self.add_skills(owner, eid, ['v0', 'v1', 'v2'])
        other = self.create_entity(other_owner)
        foreign = self.add_skills(other_owner, other, ['elsewhere'])[0]
        ok = {'name': 'Lv', 'description': 'd', 'skillIds': ids, 'scores': [1, 2, 3],
              'endsAt': '2027-01-01T00:00:00Z', 'XP': 10}

        def without(key):
            return {k: v for k, v in ok.items() if k != key}

        cases = [
            (without('name'), 'name'),
            (dict(ok, name=''), 'name'),
            (dict(ok, name='   '), 'name'),
            (dict(ok, name='n' * 101), 'name'),
            (dict(ok, name=3), 'name'),
            (dict(ok, description='d' * 5001), 'description'),
            (dict(ok, description=[]), 'description'),
            (without('skillIds'), 'skillIds'),
            (dict(ok, skillIds=5), 'skillIds'),
            (dict(ok, skillIds={'0': ids[0]}), 'skillIds'),
            (without('scores'), 'scores'),
            (dict(ok, scores=[1, 2]), 'scores'),
            (dict(ok, scores='1,2,3,4'), 'scores'),
            (dict(ok, scores=json.dumps([1])), 'scores'),
            (dict(ok, scores=None), 'scores'),
            (dict(ok, skillIds=ids[:2] + ['not-an-id']), 'skillIds[2]'),
            (dict(ok, skillIds=ids[:2] + [ids[2].upper()]), 'skillIds[2]'),
            (dict(ok, skillIds=ids[:2] + [7]), 'skillIds[2]'),
            (dict(ok, skillIds=ids[:2] + [fabricated_skill_id()]), 'skillIds[2]'),
            (dict(ok, skillIds=ids[:2] + [foreign]), 'skillIds[2]'),
            (dict(ok, skillIds=','.join(ids[:2] + [fabricated_skill_id()])), 'skillIds[2]'),
            (dict(ok, skillIds=[fabricated_skill_id()] + ids[1:]), 'skillIds[0]'),
            (dict(ok, skillIds=ids[:1] + [foreign] + [fabricated_skill_id()]), 'skillIds[1]'),
            (dict(ok, scores=[1, -1, 3]), 'scores[1]'),
            (dict(ok, scores=[1, 1.5, 3]), 'scores[1]'),
            (dict(ok, scores=[1, 'x', 3]), 'scores[1]'),
            (dict(ok, scores=[1, '', 3]), 'scores[1]'),
            (dict(ok, scores=[1, None, 3]), 'scores[1]'),
            (dict(ok, scores=[1, True, 3]), 'scores[1]'),
            (dict(ok, scores='1,-2,3'), 'scores[1]'),
            (dict(ok, scores=[1, 2, XP_MAX + 1]), 'scores[2]'),
            (without('XP'), 'XP'),
            (dict(ok, XP=-1), 'XP'),
            (dict(ok, XP='-1'), 'XP'),
            (dict(ok, XP=1.5), 'XP'),
            (dict(ok, XP='1.5'), 'XP'),
            (dict(ok, XP='abc'), 'XP'),
            (dict(ok, XP=''), 'XP'),
            (dict(ok, XP=None), 'XP'),
            (dict(ok, XP=True), 'XP'),
            (dict(ok, XP=[1]), 'XP'),
            (dict(ok, XP=XP_MAX + 1), 'XP'),
            (dict(ok, XP=str(XP_MAX + 1)), 'XP'),
            (dict(ok, XP=2 ** 62), 'XP'),
            (dict(ok, XP='1' * 30), 'XP'),
            (dict(ok, endsAt='2027-01-01T10:00:00'), 'endsAt'),
            (dict(ok, endsAt='2027-01-01'), 'endsAt'),
            (dict(ok, endsAt='tomorrow'), 'endsAt'),
            (dict(ok, endsAt='2027-13-01T00:00:00Z'), 'endsAt'),
            (dict(ok, endsAt='2027-02-30T00:00:00Z'), 'endsAt'),
            (dict(ok, endsAt='2027-01-01T25:00:00Z'), 'endsAt'),
            (dict(ok, endsAt='2027-01-01T10:00:00+2'), 'endsAt'),
            (dict(ok, endsAt='2027-01-01T10:00:00Z junk'), 'endsAt'),
            (dict(ok, endsAt=1798761600000), 'endsAt'),
            (dict(ok, endsAt=False), 'endsAt'),
        ]
        for i, (body, field) in enumerate(cases):
            with self.subTest(field=field, body=str(body)[:100]):
                self.assertEnvelope(self.put_level(owner, eid, 'lv-%d' % i, body), 400,
                                    'invalid_request', field=field)
        self.assertEnvelope(self.put_level(owner, eid, 'lv', '{"name":'), 400, 'invalid_json')
        self.assertEnvelope(self.put_level(owner, eid, 'lv', ['x']), 400, 'invalid_json')
        self.assertEqual(self.hlen(levels_key(eid)), 0)
        self.assertEqual(self.r.cli('ZCARD', levels_key(eid, ':order')), 0)
        # A failed update leaves the stored level as it was.
        lv = self.assertOk(self.put_level(owner, eid, 'kept', ok), 201)['data']
        self.assertEnvelope(self.put_level(owner, eid, 'kept', dict(
            ok, name='changed', skillIds=[ids[0], fabricated_skill_id()], scores=[1, 1])),
            400, 'invalid_request', field='skillIds[1]')
        self.assertEnvelope(self.put_level(owner, eid, 'kept', dict(ok, name='changed', XP=-5)),
                            400, 'invalid_request', field='XP')
        self.assertEqual(self.assertOk(self.get_skills(owner, eid))['data']['levels'], [lv])

    def test_level_path_ids(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        body = self.level_body()
        for lvid in ('a' * 64, 'A-z_0-9', '_', '-'):
            self.assertOk(self.put_level(owner, eid, lvid, body), 201)
        for lvid in ('a' * 65, 'a.b', 'a%20b', 'a~b', 'a%2Fb'):
            with self.subTest(lvid=lvid):
                self.assertEnvelope(self.put_level(owner, eid, lvid, body), 404, 'not_found')
        for bad_eid in ('c-123', eid.upper(), 's-' + eid[2:]):
            self.assertEnvelope(self.put_level(owner, bad_eid, 'x', body), 404, 'not_found')
        self.assertEnvelope(self.put_level(owner, unknown_entity_id(), 'x', body), 404,
                            'not_found')
        self.assertEqual(self.hlen(levels_key(eid)), 4)

    def test_level_xp_bounds_round_trip(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        lv = self.assertOk(self.put_level(owner, eid, 'max', self.level_body(XP=XP_MAX)),
                           201)['data']
        self.assertEqual(lv['XP'], XP_MAX)
        lv = self.assertOk(self.put_level(owner, eid, 'max-str',
                                          self.level_body(XP=str(XP_MAX))), 201)['data']
        self.assertEqual(lv['XP'], XP_MAX)
        lv = self.assertOk(self.put_level(owner, eid, 'zero', self.level_body(XP='0')),
                           201)['data']
        self.assertEqual(lv['XP'], 0)
        for xp in (XP_MAX + 1, str(XP_MAX + 1)):
            self.assertEnvelope(self.put_level(owner, eid, 'over', self.level_body(XP=xp)), 400,
                                'invalid_request', field='XP')
        # The raw response text carries the exact digits (an integer, no exponent or fraction).
        raw = self.raw_get('/api/skills?entityID=%s&%s' % (eid, self.auth(owner)))
        self.assertIn(b'"XP":%d' % XP_MAX, raw.replace(b' ', b''))
        levels = json.loads(raw)['data']['levels']
        self.assertEqual([(l['id'], l['XP']) for l in levels],
                         [('zero', 0), ('max', XP_MAX), ('max-str', XP_MAX)])
        for l in levels:
            self.assertIs(type(l['XP']), int)
        stored = json.loads(self.r.cli('HGET', levels_key(eid), 'max'))
        # Stored exactly, as a decimal string or an integer (never a rounded float).
        self.assertIn(type(stored['XP']), (str, int), stored)
        self.assertEqual(int(stored['XP']), XP_MAX)
        # The order entry (the Level JSON itself) is scored by the exact XP.
        self.assertEqual(self.r.cli('ZSCORE', levels_key(eid, ':order'),
                                    self.r.cli('HGET', levels_key(eid), 'max')),
                         str(XP_MAX).encode())

    def test_levels_sorted_by_xp_then_id(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        plan = [('m', 50), ('b', 10), ('a', 10), ('Z', 10), ('_u', 10), ('0', 10), ('z', 0),
                ('top', XP_MAX), ('top-1', XP_MAX - 1), ('k', 30), ('c-1', 30)]
        for lvid, xp in plan:
            self.assertOk(self.put_level(owner, eid, lvid, self.level_body(XP=xp)), 201)

        def listed():
            return [(l['id'], l['XP']) for l in
                    self.assertOk(self.get_skills(owner, eid))['data']['levels']]

        self.assertEqual(listed(), sorted(plan, key=lambda p: (p[1], p[0])))
        # An update moves a level to its new place.
        self.assertOk(self.put_level(owner, eid, 'top', self.level_body(XP=5)), 200)
        self.assertOk(self.put_level(owner, eid, 'z', self.level_body(XP='10')), 200)
        plan = [(i, {'top': 5, 'z': 10}.get(i, xp)) for i, xp in plan]
        self.assertEqual(listed(), sorted(plan, key=lambda p: (p[1], p[0])))

    def test_ends_at_normalization(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        cases = [
            ('2027-01-01T10:00:00+02:00', '2027-01-01T08:00:00.000Z'),
            ('2027-01-01T10:00:00Z', '2027-01-01T10:00:00.000Z'),
            ('2027-01-01T00:30:00-05:30', '2027-01-01T06:00:00.000Z'),
            ('2026-12-31T23:00:00-02:00', '2027-01-01T01:00:00.000Z'),
            ('2027-01-01T01:00:00+03:00', '2026-12-31T22:00:00.000Z'),
            ('2028-02-29T12:00:00.5Z', '2028-02-29T12:00:00.500Z'),
            ('2027-06-15T12:00:00.123456+00:00', '2027-06-15T12:00:00.123Z'),
            ('2027-03-01T00:00:00.001+01:00', '2027-02-28T23:00:00.001Z'),
            ('', None),
        ]
        for i, (given, want) in enumerate(cases):
            with self.subTest(endsAt=given):
                lv = self.assertOk(self.put_level(owner, eid, 'e%d' % i,
                                                  self.level_body(endsAt=given, XP=i)),
                                   201)['data']
                self.assertEqual(lv['endsAt'], want)
        levels = self.assertOk(self.get_skills(owner, eid))['data']['levels']
        self.assertEqual([l['endsAt'] for l in levels], [w for _, w in cases])

    def test_level_roles(self):
        eid, w = self.roles()
        sid = self.add_skill(w['owner'], eid, 'role skill')['id']
        body = self.level_body([sid], [4])
        for role in ('member', 'stranger'):
            self.assertEnvelope(self.put_level(w[role], eid, 'lv', body), 403, 'forbidden')
            # Without address: the recovered address is the caller, still not allowed.
            self.assertEnvelope(self.put_level(w[role], eid, 'lv', body, address=False), 403,
                                'forbidden')
        # Unsigned: no parameters; address alone; a signature of another address.
        self.assertEnvelope(self.req('POST', self.level_path(eid, 'lv', ''), body), 401,
                            'unauthenticated')
        self.assertEnvelope(self.req('POST', self.level_path(eid, 'lv', 'address=' +
                                                             w['owner'].address), body),
                            401, 'unauthenticated')
        _, sig = self.creds(w['stranger'])
        self.assertEnvelope(self.req('POST', self.level_path(
            eid, 'lv', harness.auth_query(w['owner'].address, sig)), body), 401,
            'unauthenticated')
        self.assertEqual(self.hlen(levels_key(eid)), 0)
        self.assertOk(self.put_level(w['admin'], eid, 'lv', body), 201)
        self.assertOk(self.put_level(w['owner'], eid, 'lv', body), 200)
        self.assertOk(self.put_level(self.platform, eid, 'lv', body), 200)
        self.assertOk(self.put_level(self.platform, eid, 'lv-p', body, address=False), 201)
        self.assertOk(self.put_level(w['admin'], eid, 'lv-a', body, address=False), 201)
        # An admin removed by an owner may no longer write.
        st, _, out = self.req('DELETE', '/api/entities/%s/admins/%s?%s' %
                              (eid, w['admin'].address, self.auth(w['owner'])))
        self.assertEqual(st, 200, out)
        self.assertEnvelope(self.put_level(w['admin'], eid, 'lv', body), 403, 'forbidden')
        self.assertEnvelope(self.post_skill(w['admin'], {'name': 'late', 'entityID': eid}), 403,
                            'forbidden')

    def test_level_update_without_address_for_owner(self):
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        sid = self.add_skill(owner, eid, 'k')['id']
        body = self.assertOk(self.put_level(owner, eid, 'noaddr', self.level_body([sid], [2]),
                                            address=False), 201)
        self.assertIs(body['created'], True)
        self.assertEqual(body['data']['skillIds'], [sid])
        body = self.assertOk(self.put_level(owner, eid, 'noaddr',
                                            self.level_body([sid], [3], XP=9), address=False),
                             200)
        self.assertIs(body['created'], False)
        self.assertEqual((body['data']['scores'], body['data']['XP']), ([3], 9))
        # The v 0/1 and compact spellings of the owner's signature work as well.
        _, sig = self.creds(owner)
        for spelled in (harness.to_v01(sig), harness.to_compact(sig)):
            self.assertOk(self.req('POST', self.level_path(eid, 'noaddr', 'signature=' + spelled),
                                   self.level_body([sid], [1], XP=1)), 200)

    # ------------------------------------------------------------------------------------
    # concurrency: level updates against skill creation

    def test_level_updates_racing_skill_creation_never_dangle(self):
        owner, admin = self.wallets(2)
        eid = self.create_entity(owner)
        self.add_admins(owner, eid, admin)
        known = self.add_skills(owner, eid, ['seed-%d' % i for i in range(5)])
        self.creds(admin)  # signed before the threads start
        lock = threading.Lock()
        fabricated = set()
        errors = []
        outcomes = []  # (expected field or None, status, body)
        creators, per_creator = 3, 10
        updaters, per_updater = 4, 12
        barrier = threading.Barrier(creators + updaters)

        def create(t):
            try:
                barrier.wait(timeout=scaled(10))
                for i in range(per_creator):
                    who = owner if (t + i) % 2 else admin
                    if i % 3 == 2:
                        names = ['race-%d-%d-%d' % (t, i, k) for k in range(3)]
                        resp = self.post_skill(who, {'names': names, 'entityID': eid},
                                               '/api/skills/multiple')
                        new = [s['id'] for s in resp[2]['data']] if resp[0] == 201 else []
                    else:
                        resp = self.post_skill(who, {'name': 'race-%d-%d' % (t, i),
                                                     'entityID': eid})
                        new = [resp[2]['data']['id']] if resp[0] == 201 else []
                    if resp[0] != 201:
                        errors.append(('create', resp))
                    with lock:
                        known.extend(new)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(('create', repr(e)))

        def update(t):
            rng = random.Random(1000 + t)
            try:
                barrier.wait(timeout=scaled(10))
                for i in range(per_updater):
                    with lock:
                        pool = list(known)
                    n = rng.randint(1, 4)
                    ids, expect = [], None
                    for k in range(n):
                        if rng.random() < 0.3:
                            fid = fabricated_skill_id(rng)
                            with lock:
                                fabricated.add(fid)
                            ids.append(fid)
                            if expect is None:
                                expect = 'skillIds[%d]' % k
                        else:
                            # Prefer the newest ids: those just created by the other threads.
                            ids.append(pool[-1 - rng.randrange(min(len(pool), 6))])
                    lvid = 'race-%d' % rng.randrange(6)
                    who = owner if i % 2 else admin
                    body = {'name': 'Race %d' % i, 'skillIds': ids if i % 3 else ','.join(ids),
                            'scores': [rng.randrange(100) for _ in ids], 'endsAt': '',
                            'XP': rng.randrange(1000)}
                    resp = self.put_level(who, eid, lvid, body, address=bool(i % 2))
                    outcomes.append((expect, resp))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(('update', repr(e)))

        threads = [threading.Thread(target=create, args=(t,)) for t in range(creators)]
        threads += [threading.Thread(target=update, args=(t,)) for t in range(updaters)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(scaled(60))
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertEqual(errors, [])
        self.assertEqual(len(outcomes), updaters * per_updater)
        for expect, resp in outcomes:
            if expect is None:
                self.assertIn(resp[0], (200, 201), resp)
            else:
                self.assertEnvelope(resp, 400, 'invalid_request', field=expect)
        self.assertTrue(any(e is None for e, _ in outcomes))
        self.assertTrue(any(e is not None for e, _ in outcomes))

        # Redis itself: every stored level refers only to skills that exist.
        flat = self.r.cli('HGETALL', levels_key(eid))
        stored = {flat[i].decode(): json.loads(flat[i + 1]) for i in range(0, len(flat), 2)}
        self.assertTrue(stored)
        self.assertEqual(self.r.cli('ZCARD', levels_key(eid, ':order')), len(stored))
        for lvid, rec in stored.items():
            ids = rec['skillIds'] if isinstance(rec['skillIds'], list) else []
            self.assertTrue(ids, rec)
            for sid in ids:
                self.assertNotIn(sid, fabricated)
                self.assertEqual(self.r.cli('HEXISTS', skills_key(eid), sid), 1,
                                 'level %s refers to missing skill %s' % (lvid, sid))
        self.assertEqual(self.skill_count(eid),
                         5 + creators * (per_creator + 2 * (per_creator // 3)))
        # The API agrees with Redis.
        data = self.assertOk(self.get_skills(owner, eid))['data']
        skill_ids = {s['id'] for s in data['skills']}
        self.assertEqual(len(data['levels']), len(stored))
        for lv in data['levels']:
            self.assertLevel(lv, eid, lv['id'])
            self.assertTrue(set(lv['skillIds']) <= skill_ids, lv)

    # ------------------------------------------------------------------------------------
    # round trips

    def commandstats(self):
        return harness.commandstats(self.r.cli('INFO', 'commandstats').decode())

    def round_trips(self, fn):
        """Runs fn() and returns (its result, Redis commandstats over it, the commands the
        service sent as a client, the commands its scripts ran)."""
        mon = Monitor(self.r.port)
        try:
            self.r.cli('CONFIG', 'RESETSTAT')
            mon.collect()  # drain: nothing before here counts
            result = fn()
            lines = mon.collect()
            stats = self.commandstats()
        finally:
            mon.close()
        clients, scripts = Monitor.split(lines)
        # publish: the read cache's heartbeat, once a second, whatever the requests.
        ours = {'config', 'echo', 'info', 'monitor', 'publish'}
        clients = [c for c in clients if c not in ours]
        for k in list(stats):
            if k.split('|')[0] in ours:
                del stats[k]
        return result, stats, clients, scripts

    def assertOneScript(self, stats, clients, scripts, what):
        self.assertEqual(sorted(clients), ['evalsha', 'exists'], what)
        self.assertEqual(stats.get('evalsha'), 1, (what, stats))
        self.assertNotIn('eval', stats, (what, stats))
        # exists: the revocation check, plus whatever EXISTS the script itself ran.
        self.assertEqual(stats.get('exists'), 1 + scripts.count('exists'), (what, stats))
        # Every other command Redis counted ran inside the script.
        for cmd, calls in stats.items():
            if cmd not in ('evalsha', 'exists'):
                self.assertEqual(calls, scripts.count(cmd), (what, cmd, stats, scripts))

    # GET /api/skills is one gated read (CONTRACT section 12), of a public entity as of a
    # private one: one read-only script inside one MULTI ... EXEC, the revocation EXISTS beside
    # it, that reads the entity's flags and the caller's three role lookups and the skill tree
    # only for a caller who may read it, so a refused caller never costs its bytes.
    GATED_READ = ['evalsha', 'exec', 'exists', 'multi']
    # inside the script: the flags, the role lookups, then the tree
    ROLES = ['hmget', 'sismember', 'sismember', 'hexists']

    def assertGatedRead(self, stats, clients, scripts, what, want, want_scripts):
        self.assertEqual(sorted(clients), want, what)
        self.assertEqual(sorted(scripts), sorted(want_scripts), what)
        self.assertNotIn('eval', stats, (what, stats))
        self.assertEqual(stats.get('evalsha'), want.count('evalsha'), (what, stats))

    def test_round_trips_per_request(self):
        """What each request costs Redis when it is read from Redis: measured on an instance
        with the read cache off (test_entities pins what the cache saves)."""
        self.port = self.entityd(redis=self.r, env={'READ_CACHE_MB': '0',
                                                    'PLATFORM_ADMINS': self.platform.address}).port
        owner, = self.wallets(1)
        eid = self.create_entity(owner)
        sids = self.add_skills(owner, eid, ['rt0', 'rt1'])
        self.assertOk(self.put_level(owner, eid, 'warm', self.level_body(sids)), 201)
        stranger, fresh = self.wallets(2)
        for w in (owner, stranger):
            self.assertOk(self.get_skills(w, eid))  # signature now cached: not a factor

        calls = [
            ('GET /api/skills', lambda: self.get_skills(owner, eid), 200),
            ('POST /api/skills', lambda: self.post_skill(
                owner, {'name': 'rt-one', 'entityID': eid}), 201),
            ('POST /api/skills/multiple', lambda: self.post_skill(
                owner, {'names': ['rt-m1', 'rt-m2', 'rt-m3'], 'entityID': eid},
                '/api/skills/multiple'), 201),
            ('POST /api/skills?multiple=true', lambda: self.post_skill(
                owner, {'names': '["rt-q1","rt-q2"]', 'entityID': eid},
                query='multiple=true'), 201),
            ('POST /api/skills names form', lambda: self.post_skill(
                owner, {'names': ['rt-n1'], 'entityID': eid}), 201),
            ('level update (new)', lambda: self.put_level(owner, eid, 'rt-new',
                                                          self.level_body(sids, XP=3)), 201),
            ('level update (existing)', lambda: self.put_level(
                owner, eid, 'rt-new', self.level_body(sids[:1], XP=4)), 200),
            ('level update (no address)', lambda: self.put_level(
                owner, eid, 'rt-new', self.level_body(sids, XP=5), address=False), 200),
            ('level update (unknown skill)', lambda: self.put_level(
                owner, eid, 'rt-bad', self.level_body([fabricated_skill_id()])), 400),
            ('duplicate skill', lambda: self.post_skill(
                owner, {'name': 'RT-ONE', 'entityID': eid}), 409),
            ('GET unknown entity', lambda: self.get_skills(owner, unknown_entity_id()), 404),
            ('POST skill as a stranger', lambda: self.post_skill(
                stranger, {'name': 'nope', 'entityID': eid}), 403),
        ]
        for what, fn, status in calls:
            with self.subTest(what):
                resp, stats, clients, scripts = self.round_trips(fn)
                self.assertEqual(resp[0], status, (what, resp))
                if what.startswith('GET'):
                    # an unknown entity: its flags alone
                    self.assertGatedRead(stats, clients, scripts, what, self.GATED_READ,
                                         self.ROLES + ['hmget'] if status == 200 else ['hmget'])
                else:
                    self.assertOneScript(stats, clients, scripts, what)
        # A fresh signature (recovered, not cached) costs no extra Redis command.
        resp, stats, clients, scripts = self.round_trips(lambda: self.get_skills(fresh, eid))
        self.assertEqual(resp[0], 200)
        self.assertGatedRead(stats, clients, scripts, 'GET with a new signature',
                             self.GATED_READ, self.ROLES + ['hmget'])
        # A private entity: its owner reads, a stranger is refused; both in the one read, and
        # the tree is read for the owner alone.
        private = self.create_entity(owner, public=False)
        for who, status, tree in ((owner, 200, ['hmget']), (stranger, 403, [])):
            resp, stats, clients, scripts = self.round_trips(lambda: self.get_skills(who, private))
            self.assertEqual(resp[0], status, resp)
            self.assertGatedRead(stats, clients, scripts, 'GET private', self.GATED_READ,
                                 self.ROLES + tree)


    def test_public_tree_kept_once_for_all_callers(self):
        """A public, enabled entity's skill tree is the same for every signed caller: once one
        caller's gated read found it open, the next caller's read is the plain read kept in the
        read cache for all, and costs Redis nothing. An entity that is not open (private, or
        made private since) still goes through the gate, the tree read for no stranger."""
        harness.wait_for(lambda: harness.read_cache_metrics(self.port).get(
            'entityd_read_cache_enabled') == 1, scaled(10), what='read cache on')
        owner, first, second = self.wallets(3)
        eid = self.create_entity(owner)
        self.add_skills(owner, eid, ['once0', 'once1'])
        private = self.create_entity(owner, public=False)
        self.add_skills(owner, private, ['hidden'])
        # Each caller's revocation check is kept in the cache too: taken out of the count.
        other = self.create_entity(owner)
        for w in (first, second):
            self.assertOk(self.get_skills(w, other))
        want = self.assertOk(self.get_skills(first, eid))['data']
        self.assertEqual(sorted(s['name'] for s in want['skills']), ['once0', 'once1'])

        resp, stats, clients, scripts = self.round_trips(lambda: self.get_skills(second, eid))
        self.assertEqual(self.assertOk(resp)['data'], want)
        self.assertEqual((clients, stats, scripts), ([], {}, []), 'a second caller')

        resp, stats, clients, scripts = self.round_trips(
            lambda: self.get_skills(second, private))
        self.assertEnvelope(resp, 403, 'forbidden')
        self.assertIn('evalsha', clients)
        self.assertNotIn('hmget', clients)
        self.assertEqual(sorted(scripts), sorted(self.ROLES), 'the tree is not read')

        # Made private: the kept read goes with the change, the stranger meets the gate.
        body = {'name': 'Now private', 'description': '', 'ownerAddresses': [owner.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'public': False}
        self.assertOk(self.req('POST', '/api/entities?entityID=%s&%s' %
                               (eid, self.auth(owner)), body))
        resp, stats, clients, scripts = self.round_trips(lambda: self.get_skills(second, eid))
        self.assertEnvelope(resp, 403, 'forbidden')
        self.assertIn('evalsha', clients)
        self.assertEqual(sorted(scripts), sorted(self.ROLES), 'the tree is not read')


if __name__ == '__main__':
    harness.main()
