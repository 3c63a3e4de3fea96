"""Authorization matrix: every route of service/resources/routes.c x every kind of caller x every kind of
entity, against the status the contract gives (CONTRACT sections 2-3 and the README's
decisions). The expected statuses below are written from those documents, not from running the
service; the table must name every route of routes.c (checked by parsing it).

Callers:
  anon        no address, no signature
  unsigned    a stranger's address, no signature
  unsig-owner the owner's address, no signature (claiming to be the owner)
  badsig      the owner's address with another wallet's signature
  stranger    signed, no role in the entity
  member      signed, added with force-add
  admin       signed, in the entity's admin set
  owner       signed, in ownerAddress
  platform    signed, in PLATFORM_ADMINS (not an owner of the entity)
Entities: public (enabled), private (public: false), disabled (isEnabled: false, public),
missing (a well-formed id nobody created).

Rules used (section 2): read rule -- a public enabled entity is readable by any authenticated
caller (GET entity even unsigned), a private one by its owners, admins, members and platform
admins (403 otherwise, 401 without a valid signature); a disabled entity is 404 to all but its
owners and platform admins, and refuses writes from owners and admins with 403. Platform admins
act as owners everywhere. A required address that is missing is a missing parameter (400, field
address); a signature missing where required, malformed or not matching is 401."""

import os
import re
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import fresh_address  # noqa: E402

ROLES = ['anon', 'unsigned', 'unsig-owner', 'badsig', 'stranger', 'member', 'admin', 'owner',
         'platform']
VARIANTS = ['public', 'private', 'disabled', 'missing']


def parse(block):
    """'public: 400 200 ...' lines -> {variant: {role: status}}; '2xx' is the route's success."""
    out = {}
    for line in block.strip().splitlines():
        name, _, cells = line.partition(':')
        cells = cells.split()
        assert len(cells) == len(ROLES), line
        out[name.strip()] = dict(zip(ROLES, cells))
    return out


#                anon  unsig unsig-own badsig stranger member admin owner platform
ALL_200 = parse('''
any:             200   200   200       200    200      200    200   200   200
''')
CREATE_OPEN = parse('''
any:             400   401   401       401    2xx      2xx    2xx   2xx   2xx
''')
PLATFORM_ONLY = parse('''
any:             400   401   401       401    403      403    403   403   2xx
''')
REVOKE = parse('''
any:             400   401   401       401    200      200    200   200   200
''')
# GET /api/entities/{id}: address required, signature optional.
READ_ENTITY = parse('''
public:          400   200   200       401    200      200    200   200   200
private:         400   401   401       401    403      200    200   200   200
disabled:        400   404   404       401    404      404    404   200   200
missing:         400   404   404       401    404      404    404   404   404
''')
# users, GET skills: the read rule, signed.
READ_SIGNED = parse('''
public:          400   401   401       401    200      200    200   200   200
private:         400   401   401       401    403      200    200   200   200
disabled:        400   401   401       401    404      404    404   200   200
missing:         400   401   401       401    404      404    404   404   404
''')
# GET admins: owners and admins.
READ_ADMINS = parse('''
public:          400   401   401       401    403      403    200   200   200
private:         400   401   401       401    403      403    200   200   200
disabled:        400   401   401       401    404      404    404   200   200
missing:         400   401   401       401    404      404    404   404   404
''')
# GET api-keys: owners alone.
READ_OWNERS = parse('''
public:          400   401   401       401    403      403    403   200   200
private:         400   401   401       401    403      403    403   200   200
disabled:        400   401   401       401    404      404    404   200   200
missing:         400   401   401       401    404      404    404   404   404
''')
# force-add, POST skills (one or several): owners and admins.
WRITE_OWNERS_ADMINS = parse('''
public:          400   401   401       401    403      403    2xx   2xx   2xx
private:         400   401   401       401    403      403    2xx   2xx   2xx
disabled:        400   401   401       401    404      404    403   403   2xx
missing:         400   401   401       401    404      404    404   404   404
''')
# level update: owners and admins; address optional, signature required.
WRITE_LEVEL = parse('''
public:          401   401   401       401    403      403    2xx   2xx   2xx
private:         401   401   401       401    403      403    2xx   2xx   2xx
disabled:        401   401   401       401    404      404    403   403   2xx
missing:         401   401   401       401    404      404    404   404   404
''')
# entity update, POST admins, DELETE admin, DELETE api-keys: owners.
WRITE_OWNERS = parse('''
public:          400   401   401       401    403      403    403   200   200
private:         400   401   401       401    403      403    403   200   200
disabled:        400   401   401       401    404      404    403   403   200
missing:         400   401   401       401    404      404    404   404   404
''')
# POST api-keys: owners (201).
CREATE_OWNERS = parse('''
public:          400   401   401       401    403      403    403   2xx   2xx
private:         400   401   401       401    403      403    403   2xx   2xx
disabled:        400   401   401       401    404      404    403   403   2xx
missing:         400   401   401       401    404      404    404   404   404
''')
# leave: any signed caller (only a member is removed); a disabled entity as every write.
LEAVE = parse('''
public:          400   401   401       401    200      200    200   200   200
private:         400   401   401       401    200      200    200   200   200
disabled:        400   401   401       401    404      404    403   403   200
missing:         400   401   401       401    404      404    404   404   404
''')
# GET join-rules/check for the caller's own address: any signed caller; a disabled entity as
# every write's check.
JOIN_CHECK = parse('''
public:          400   401   401       401    200      200    200   200   200
private:         400   401   401       401    200      200    200   200   200
disabled:        400   401   401       401    404      404    403   403   200
missing:         400   401   401       401    404      404    404   404   404
''')
# POST join under the rule "an owner of this entity": a member already joins 0, the owner
# joins, anyone else is refused by the rule (403 with its failing leaf).
JOIN = parse('''
public:          400   401   401       401    403      200    403   200   403
private:         400   401   401       401    403      200    403   200   403
disabled:        400   401   401       401    404      404    403   403   403
missing:         400   401   401       401    404      404    404   404   404
''')

# Sessions (CONTRACT section 13). POST /api/auth/challenge and /api/auth/session are signed by
# their body, not the query: every caller gets a challenge, and a session of the body's
# signer. DELETE /api/auth/session ends the token it is sent (none here: 401 for all). The
# sessions' list, revoke-all and a session's end by id: any signed caller, on its own
# sessions (an unknown id: 404).
ALL_2XX = parse('''
any:             2xx   2xx   2xx       2xx    2xx      2xx    2xx   2xx   2xx
''')
ALL_401 = parse('''
any:             401   401   401       401    401      401    401   401   401
''')
SESSIONS_SIGNED = parse('''
any:             400   401   401       401    2xx      2xx    2xx   2xx   2xx
''')
SESSION_BY_ID = parse('''
any:             400   401   401       401    404      404    404   404   404
''')

# GET a wallet's entities: signed; what it lists is test_find.py's.
READ_WALLET = parse('''
any:             400   401   401       401    200      200    200   200   200
''')
# GET the directory: address required, signature optional.
READ_DIRECTORY = parse('''
any:             400   200   200       401    200      200    200   200   200
''')

# (method, pattern from routes.c, case name, rule, success status)
TABLE = [
    ('GET', '/healthz', 'health', ALL_200, 200),
    ('GET', '/readyz', 'ready', ALL_200, 200),
    ('GET', '/metrics', 'metrics', ALL_200, 200),
    ('GET', '/api/auth/message', 'message', ALL_200, 200),
    ('POST', '/api/auth/revoke', 'revoke', REVOKE, 200),
    ('POST', '/api/auth/challenge', 'challenge', ALL_2XX, 200),
    ('POST', '/api/auth/session', 'session-create', ALL_2XX, 201),
    ('DELETE', '/api/auth/session', 'session-end', ALL_401, 401),
    ('GET', '/api/auth/sessions', 'sessions-list', SESSIONS_SIGNED, 200),
    ('POST', '/api/auth/sessions/revoke-all', 'sessions-revoke-all', SESSIONS_SIGNED, 200),
    ('DELETE', '/api/auth/sessions/{id}', 'session-end-by-id', SESSION_BY_ID, 404),
    ('POST', '/api/entities', 'create', CREATE_OPEN, 201),
    ('POST', '/api/entities', 'create-isEnabled', PLATFORM_ONLY, 201),
    ('POST', '/api/entities', 'create-platform-mode', PLATFORM_ONLY, 201),
    ('POST', '/api/entities', 'update', WRITE_OWNERS, 200),
    ('GET', '/api/entities/{id}', 'get', READ_ENTITY, 200),
    ('GET', '/api/entities/{id}/users', 'users', READ_SIGNED, 200),
    ('POST', '/api/entities/{id}/force-add', 'force-add', WRITE_OWNERS_ADMINS, 200),
    ('GET', '/api/entities/{id}/admins', 'admins-get', READ_ADMINS, 200),
    ('POST', '/api/entities/{id}/admins', 'admins-post', WRITE_OWNERS, 200),
    ('DELETE', '/api/entities/{id}/admins/{address}', 'admins-delete', WRITE_OWNERS, 200),
    ('GET', '/api/entities/{id}/api-keys', 'apikeys-get', READ_OWNERS, 200),
    ('POST', '/api/entities/{id}/api-keys', 'apikeys-post', CREATE_OWNERS, 201),
    ('DELETE', '/api/entities/{id}/api-keys/{keyId}', 'apikeys-delete', WRITE_OWNERS, 200),
    ('GET', '/api/entities/{id}/webhooks/{wid}/deliveries', 'wh-deliveries', READ_ADMINS, 200),
    ('POST', '/api/entities/{id}/webhooks/{wid}/deliveries/{did}/retry', 'wh-retry',
     WRITE_OWNERS_ADMINS, 200),
    ('POST', '/api/entities/{id}/webhooks/{wid}/test', 'wh-test', WRITE_OWNERS_ADMINS, 200),
    ('POST', '/api/entities/{id}/levels/{lvID}/update', 'level', WRITE_LEVEL, 201),
    ('GET', '/api/entities/{id}/members/{address}/progress', 'progress', READ_SIGNED, 200),
    ('GET', '/api/entities/{id}/members/{address}/contributions', 'contributions', READ_SIGNED,
     200),
    ('GET', '/api/entities/{id}/leaderboard', 'leaderboard', READ_SIGNED, 200),
    ('GET', '/api/entities/{id}/events', 'events', READ_ADMINS, 200),
    ('GET', '/api/entities/{id}/events/stream', 'events-stream', READ_ADMINS, 200),
    ('GET', '/api/skills', 'skills-get', READ_SIGNED, 200),
    ('POST', '/api/skills', 'skills-post', WRITE_OWNERS_ADMINS, 201),
    ('POST', '/api/skills/multiple', 'skills-multiple', WRITE_OWNERS_ADMINS, 201),
    ('POST', '/api/entities/{id}/contributions', 'contrib-award', WRITE_OWNERS_ADMINS, 201),
    ('POST', '/api/entities/{id}/contributions/{cid}/revoke', 'contrib-revoke',
     WRITE_OWNERS_ADMINS, 200),
    ('DELETE', '/api/entities/{id}', 'entity-delete', WRITE_OWNERS, 200),
    ('DELETE', '/api/entities/{id}/members/{address}', 'member-delete', WRITE_OWNERS_ADMINS,
     200),
    ('POST', '/api/entities/{id}/members/remove', 'members-remove', WRITE_OWNERS_ADMINS, 200),
    ('POST', '/api/entities/{id}/skills/{skillId}/update', 'skill-update', WRITE_OWNERS_ADMINS,
     200),
    ('DELETE', '/api/entities/{id}/skills/{skillId}', 'skill-delete', WRITE_OWNERS_ADMINS, 200),
    ('DELETE', '/api/entities/{id}/levels/{lvID}', 'level-delete', WRITE_OWNERS_ADMINS, 200),
    # Webhook endpoints (CONTRACT section 14): an entity's for owners and admins, the
    # platform's for platform admins.
    ('POST', '/api/entities/{id}/webhooks', 'webhooks-post', WRITE_OWNERS_ADMINS, 201),
    ('GET', '/api/entities/{id}/webhooks', 'webhooks-get', READ_ADMINS, 200),
    ('GET', '/api/entities/{id}/webhooks/{wid}', 'webhook-get', READ_ADMINS, 200),
    ('POST', '/api/entities/{id}/webhooks/{wid}/update', 'webhook-update', WRITE_OWNERS_ADMINS,
     200),
    ('POST', '/api/entities/{id}/webhooks/{wid}/rotate-secret', 'webhook-rotate',
     WRITE_OWNERS_ADMINS, 200),
    ('DELETE', '/api/entities/{id}/webhooks/{wid}', 'webhook-delete', WRITE_OWNERS_ADMINS, 200),
    ('POST', '/api/webhooks', 'platform-webhooks-post', PLATFORM_ONLY, 201),
    ('GET', '/api/webhooks', 'platform-webhooks-get', PLATFORM_ONLY, 200),
    ('GET', '/api/webhooks/{wid}', 'platform-webhook-get', PLATFORM_ONLY, 200),
    ('POST', '/api/webhooks/{wid}/update', 'platform-webhook-update', PLATFORM_ONLY, 200),
    ('POST', '/api/webhooks/{wid}/rotate-secret', 'platform-webhook-rotate', PLATFORM_ONLY, 200),
    ('DELETE', '/api/webhooks/{wid}', 'platform-webhook-delete', PLATFORM_ONLY, 200),
    ('GET', '/api/webhooks/{wid}/deliveries', 'platform-wh-deliveries', PLATFORM_ONLY, 200),
    ('POST', '/api/webhooks/{wid}/deliveries/{did}/retry', 'platform-wh-retry', PLATFORM_ONLY,
     200),
    ('POST', '/api/webhooks/{wid}/test', 'platform-wh-test', PLATFORM_ONLY, 200),
    ('GET', '/api/attestations/config', 'attest-config', ALL_200, 200),
    ('GET', '/api/entities/{id}/members/{address}/attestations', 'attestations', READ_SIGNED,
     200),
    ('GET', '/api/entities/by-alias/{alias}', 'by-alias', READ_ENTITY, 200),
    ('GET', '/api/wallets/{address}/entities', 'wallet-entities', READ_WALLET, 200),
    ('GET', '/api/entities', 'directory', READ_DIRECTORY, 200),
    # Join rules (CONTRACT section 16): the last rule set (by the platform admin) is "an owner
    # of this entity".
    ('POST', '/api/entities/{id}/join-rules', 'joinrules-post', WRITE_OWNERS_ADMINS, 200),
    ('GET', '/api/entities/{id}/join-rules', 'joinrules-get', READ_ADMINS, 200),
    ('GET', '/api/entities/{id}/join-rules/check', 'joinrules-check', JOIN_CHECK, 200),
    ('POST', '/api/entities/{id}/join', 'join', JOIN, 200),
    ('DELETE', '/api/entities/{id}/join-rules', 'joinrules-delete', WRITE_OWNERS_ADMINS, 200),
    # Last: the member leaves, and is no member for any cell after it.
    ('POST', '/api/entities/{id}/leave', 'leave', LEAVE, 200),
]

WEBHOOK_URL = 'https://127.0.0.1:9/authz'

ERROR_CODES = {400: 'invalid_request', 401: 'unauthenticated', 403: 'forbidden',
               404: 'not_found'}


def routes_in_source():
    path = os.path.join(harness.REPO, 'service', 'resources', 'routes.c')
    with open(path) as f:
        src = f.read()
    return set(re.findall(r'\{\s*HTTP_([A-Z]+)\s*,\s*"([^"]+)"', src))


class AuthzTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        w = harness.Wallet.random(7)
        cls.w = dict(zip(['owner', 'admin', 'member', 'stranger', 'platform', 'other'], w))
        # --dev: attestations signed with the fixed, public development key, so that their
        # routes have cells of their own.
        # WEBHOOK_ALLOW_PRIVATE: endpoints name a loopback URL (never reached here).
        cls.svc = cls.class_entityd(redis=cls.r, env={
            'PLATFORM_ADMINS': cls.w['platform'].address, 'WEBHOOK_ALLOW_PRIVATE': 'true'},
            args=('--dev',))
        cls.svc_platform = cls.class_entityd(redis=cls.r, env={
            'PLATFORM_ADMINS': cls.w['platform'].address, 'ENTITY_CREATION': 'platform'})
        cls.port = cls.svc.port
        msg, _ = harness.current_message(cls.port)
        cls.sig = {name: wallet.sign(msg)[1] for name, wallet in cls.w.items()}
        cls.entities = {}
        cls.spare_admins = {}
        cls.contribs = {'missing': 'k-' + str(uuid.uuid4())}
        cls.doomed = {'missing': ['s-' + str(uuid.uuid4()) for _ in range(len(ROLES) + 1)]}
        cls.aliases = {'missing': 'authz-' + uuid.uuid4().hex[:12]}
        for variant in ('public', 'private', 'disabled'):
            body = cls.entity_body()
            cls.aliases[variant] = body['communityURLAlias'] = 'authz-' + uuid.uuid4().hex[:12]
            if variant == 'private':
                body['public'] = False
            st, _, b = cls.call(cls, 'owner', 'POST', '/api/entities', body)
            assert st == 201, (variant, st, b)
            eid = b['data']['id']
            cls.entities[variant] = eid
            # Roles, and spare admins for the DELETE cells to remove one at a time.
            spares = [fresh_address() for _ in range(len(ROLES))]
            st, _, b = cls.call(cls, 'owner', 'POST', '/api/entities/%s/admins' % eid,
                                {'addresses': [cls.w['admin'].address] + spares})
            assert st == 200, (st, b)
            cls.spare_admins[variant] = spares
            st, _, b = cls.call(cls, 'owner', 'POST', '/api/entities/%s/force-add' % eid,
                                {'addresses': [cls.w['member'].address], 'Chain': 'eth'})
            assert st == 200, (st, b)
            # A contribution for the revoke cells (revoking it again answers 200 too).
            st, _, b = cls.call(cls, 'owner', 'POST', '/api/entities/%s/contributions' % eid,
                                {'member': cls.w['member'].address, 'title': 'Seed', 'xp': 1})
            assert st == 201, (st, b)
            cls.contribs[variant] = b['data']['id']
            # A skill to rename, and a skill and a level per caller to delete.
            st, _, b = cls.call(cls, 'owner', 'POST', '/api/skills/multiple', {
                'entityID': eid, 'names': ['Kept'] + ['Doomed %d' % i for i in range(len(ROLES))]})
            assert st == 201, (st, b)
            cls.doomed[variant] = [x['id'] for x in b['data']]
            for i in range(len(ROLES)):
                st, _, b = cls.call(cls, 'owner', 'POST', '/api/entities/%s/levels/del-%d/update'
                                    % (eid, i), {'name': 'L', 'skillIds': [], 'scores': [],
                                                 'XP': i})
                assert st == 201, (st, b)
        body = cls.entity_body()
        body['id'] = cls.entities['disabled']
        body['isEnabled'] = False
        st, _, b = cls.call(cls, 'platform', 'POST', '/api/entities', body)
        assert st == 200 and b['data']['isEnabled'] is False, (st, b)
        cls.entities['missing'] = 'c-' + str(uuid.uuid4())
        # An endpoint per entity (and one of the platform) for the cells that name one.
        cls.webhooks = {'missing': 'wh-' + str(uuid.uuid4())}
        for variant in ('public', 'private', 'disabled', None):
            path = '/api/entities/%s/webhooks' % cls.entities[variant] if variant else \
                '/api/webhooks'
            st, _, b = cls.call(cls, 'platform', 'POST', path, {'url': WEBHOOK_URL})
            assert st == 201, (st, b)
            cls.webhooks[variant] = b['data']['id']
        cls.counter = 0

    @classmethod
    def entity_body(cls):
        return {'name': 'Authz Guild', 'description': 'matrix',
                'ownerAddresses': [cls.w['owner'].address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': ''}

    def fresh_entity(self, variant):
        body = self.entity_body()
        body['public'] = variant != 'private'
        st, _, b = self.call('owner', 'POST', '/api/entities', body)
        assert st == 201, (st, b)
        eid = b['data']['id']
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/admins' % eid,
                             {'addresses': [self.w['admin'].address]})
        assert st == 200, (st, b)
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/force-add' % eid,
                             {'addresses': [self.w['member'].address], 'Chain': 'eth'})
        assert st == 200, (st, b)
        if variant == 'disabled':
            body = self.entity_body()
            body['id'], body['isEnabled'] = eid, False
            st, _, b = self.call('platform', 'POST', '/api/entities', body)
            assert st == 200, (st, b)
        return eid

    def webhook_of(self, variant, eid):
        """(wid, delivery id) of an endpoint of the variant's entity with one delivery in its
        log, written into Redis as the webhook routes and deliveries leave them (the endpoint
        is in no instance's webhooks set: nothing is delivered to it; its address refuses
        connections, so a test send fails at once)."""
        cache = type(self).__dict__.get('webhooks_made')
        if cache is None:
            cache = type(self).webhooks_made = {}
        if variant not in cache:
            wid = 'wh-' + str(uuid.uuid4())
            did = '%s:1700000000000-0' % eid
            if variant != 'missing':
                rec = ('{"id":"%s","url":"http://127.0.0.1:1/hook","events":[],"description":"",'
                       '"enabled":true,"createdAt":"2026-01-01T00:00:00.000Z","createdBy":"%s",'
                       '"disabledReason":null}') % (wid, self.w['owner'].address.lower())
                self.r.cli('HSET', 'ent:{%s}:webhooks' % eid, wid, rec, 'sec:' + wid,
                           'whsec_' + 'A' * 43 + '=')
                self.r.cli('HSET', 'ent:{%s}:wh:%s:log' % (eid, wid), did,
                           '{"id":"%s","eventId":"1700000000000-0","type":"member.added",'
                           '"attempts":1,"status":"failed","lastAttemptAt":null,'
                           '"nextAttemptAt":null,"responseStatus":500,"responseBody":null,'
                           '"reason":"HTTP 500"}' % did)
                self.r.cli('ZADD', 'ent:{%s}:wh:%s:order' % (eid, wid), '1700000000000', did)
            cache[variant] = (wid, did)
        return cache[variant]

    def call(self, role, method, path, body=None, port=None):
        """Sends the request as role: address and signature added to the query."""
        q = ''
        if role == 'unsigned':
            q = 'address=' + self.w['stranger'].address
        elif role == 'unsig-owner':
            q = 'address=' + self.w['owner'].address
        elif role == 'badsig':
            q = 'address=%s&signature=%s' % (self.w['owner'].address, self.sig['other'])
        elif role != 'anon':
            q = 'address=%s&signature=%s' % (self.w[role].address, self.sig[role])
        if q:
            path += ('&' if '?' in path else '?') + q
        return harness.request(port or self.port, method, path, body=body)

    def next_id(self):
        type(self).counter += 1
        return type(self).counter

    def build(self, case, variant, role):
        """(method, path, body, port) of one cell."""
        eid = self.entities.get(variant)
        n = self.next_id()
        port = None
        if case in ('health', 'ready', 'metrics', 'message'):
            path = {'health': '/healthz', 'ready': '/readyz', 'metrics': '/metrics',
                    'message': '/api/auth/message'}[case]
            return 'GET', path, None, port
        if case == 'revoke':
            return 'POST', '/api/auth/revoke', None, port
        if case == 'challenge':
            return 'POST', '/api/auth/challenge', {'address': fresh_address()}, port
        if case == 'session-create':
            body = {'address': self.w['owner'].address, 'signature': self.sig['owner']}
            return 'POST', '/api/auth/session', body, port
        if case == 'session-end':
            return 'DELETE', '/api/auth/session', None, port
        if case == 'sessions-list':
            return 'GET', '/api/auth/sessions', None, port
        if case == 'sessions-revoke-all':
            return 'POST', '/api/auth/sessions/revoke-all', None, port
        if case == 'session-end-by-id':
            return 'DELETE', '/api/auth/sessions/%s' % ('0' * 24), None, port
        if case.startswith('create'):
            body = self.entity_body()
            if case == 'create-isEnabled':
                body['isEnabled'] = True
            if case == 'create-platform-mode':
                port = self.svc_platform.port
            return 'POST', '/api/entities', body, port
        if case == 'update':
            return 'POST', '/api/entities?entityID=%s' % eid, self.entity_body(), port
        if case == 'get':
            return 'GET', '/api/entities/%s' % eid, None, port
        if case == 'by-alias':
            return 'GET', '/api/entities/by-alias/%s' % self.aliases[variant], None, port
        if case == 'wallet-entities':
            return 'GET', '/api/wallets/%s/entities' % self.w['owner'].address, None, port
        if case == 'directory':
            return 'GET', '/api/entities?limit=5', None, port
        if case == 'users':
            return 'GET', '/api/entities/%s/users?limit=10' % eid, None, port
        if case == 'force-add':
            return ('POST', '/api/entities/%s/force-add' % eid,
                    {'addresses': [fresh_address()], 'Chain': 'eth'}, port)
        if case == 'admins-get':
            return 'GET', '/api/entities/%s/admins' % eid, None, port
        if case == 'admins-post':
            return ('POST', '/api/entities/%s/admins' % eid, {'addresses': [fresh_address()]},
                    port)
        if case == 'admins-delete':
            spares = self.spare_admins.get(variant) or [fresh_address()] * len(ROLES)
            target = spares[ROLES.index(role)]
            return 'DELETE', '/api/entities/%s/admins/%s' % (eid, target), None, port
        if case == 'apikeys-get':
            return 'GET', '/api/entities/%s/api-keys' % eid, None, port
        if case == 'apikeys-post':
            return ('POST', '/api/entities/%s/api-keys' % eid,
                    {'name': 'Key %d' % n, 'scope': 'award'}, port)
        if case == 'apikeys-delete':
            # Each cell a key of its own, made by the platform admin (any variant but missing).
            kid = '0' * 24
            if variant != 'missing':
                st, _, b = self.call('platform', 'POST', '/api/entities/%s/api-keys' % eid,
                                     {'name': 'Doomed %d' % n, 'scope': 'admin'})
                assert st == 201, (st, b)
                kid = b['data']['id']
            return 'DELETE', '/api/entities/%s/api-keys/%s' % (eid, kid), None, port
        if case.startswith('platform-wh-'):
            # The platform endpoint, with one failed delivery in an entity's log
            wid = self.webhooks[None]
            eid = self.entities['public']
            did = '%s:1700000000000-0' % eid
            self.r.cli('HSET', 'ent:{%s}:wh:%s:log' % (eid, wid), did,
                       '{"id":"%s","eventId":"1700000000000-0","type":"member.added",'
                       '"attempts":1,"status":"failed","lastAttemptAt":null,'
                       '"nextAttemptAt":null,"responseStatus":500,"responseBody":null,'
                       '"reason":"HTTP 500"}' % did)
            self.r.cli('ZADD', 'whp:{%s}:recent' % wid, '1700000000000', did)
            base = '/api/webhooks/%s' % wid
            return {'platform-wh-deliveries': ('GET', base + '/deliveries?limit=5', None, port),
                    'platform-wh-retry': ('POST', base + '/deliveries/%s/retry' % did, None,
                                          port),
                    'platform-wh-test': ('POST', base + '/test', None, port)}[case]
        if case.startswith('wh-'):
            wid, did = self.webhook_of(variant, eid)
            base = '/api/entities/%s/webhooks/%s' % (eid, wid)
            return {'wh-deliveries': ('GET', base + '/deliveries?limit=5', None, port),
                    'wh-retry': ('POST', base + '/deliveries/%s/retry' % did, None, port),
                    'wh-test': ('POST', base + '/test', None, port)}[case]
        if 'webhook' in case:
            return self.build_webhook(case, variant, role, eid, n) + (port,)
        if case == 'level':
            return ('POST', '/api/entities/%s/levels/lv-%d/update' % (eid, n),
                    {'name': 'Level %d' % n, 'skillIds': [], 'scores': [], 'XP': n}, port)
        if case == 'attest-config':
            return 'GET', '/api/attestations/config', None, port
        if case in ('progress', 'contributions', 'attestations'):
            return ('GET', '/api/entities/%s/members/%s/%s' % (eid, self.w['member'].address,
                                                               case), None, port)
        if case == 'leaderboard':
            return 'GET', '/api/entities/%s/leaderboard' % eid, None, port
        if case == 'events':
            return 'GET', '/api/entities/%s/events' % eid, None, port
        if case == 'events-stream':
            return 'GET', '/api/entities/%s/events/stream' % eid, None, port
        if case == 'skills-get':
            return 'GET', '/api/skills?entityID=%s' % eid, None, port
        if case == 'skills-post':
            return ('POST', '/api/skills', {'name': 'Skill %d' % n, 'description': '',
                                            'entityID': eid}, port)
        if case == 'skills-multiple':
            return ('POST', '/api/skills/multiple',
                    {'names': ['Many %d a' % n, 'Many %d b' % n], 'entityID': eid}, port)
        if case == 'contrib-award':
            return ('POST', '/api/entities/%s/contributions' % eid,
                    {'member': self.w['member'].address, 'title': 'Award %d' % n, 'xp': 1}, port)
        if case == 'entity-delete':
            # Each cell deletes an entity of its own, made like the variant's.
            if variant != 'missing':
                eid = self.fresh_entity(variant)
            return 'DELETE', '/api/entities/%s' % eid, None, port
        if case == 'contrib-revoke':
            return ('POST', '/api/entities/%s/contributions/%s/revoke' %
                    (eid, self.contribs[variant]), {'reason': 'Revoke %d' % n}, port)
        if case == 'member-delete':
            return 'DELETE', '/api/entities/%s/members/%s' % (eid, fresh_address()), None, port
        if case == 'members-remove':
            return ('POST', '/api/entities/%s/members/remove' % eid,
                    {'addresses': [fresh_address()]}, port)
        if case == 'skill-update':
            return ('POST', '/api/entities/%s/skills/%s/update' % (eid, self.doomed[variant][0]),
                    {'name': 'Kept %d' % n}, port)
        if case == 'skill-delete':
            sid = self.doomed[variant][1 + ROLES.index(role)]
            return 'DELETE', '/api/entities/%s/skills/%s' % (eid, sid), None, port
        if case == 'level-delete':
            return ('DELETE', '/api/entities/%s/levels/del-%d' % (eid, ROLES.index(role)), None,
                    port)
        if case == 'leave':
            return 'POST', '/api/entities/%s/leave' % eid, None, port
        if case.startswith('joinrules') or case == 'join':
            return self.build_join(case, variant, role, eid) + (port,)
        raise AssertionError(case)

    def build_join(self, case, variant, role, eid):
        """(method, path, body) of a join rule cell."""
        rules = '/api/entities/%s/join-rules' % eid
        rule = {'rule': {'role': {'entityID': eid, 'role': 'owner'}}}
        if case == 'joinrules-post':
            return 'POST', rules, rule
        if case == 'joinrules-get':
            return 'GET', rules, None
        if case == 'joinrules-check':
            who = self.w.get(role, self.w['stranger'])
            if role in ('unsig-owner', 'badsig'):
                who = self.w['owner']
            return 'GET', '%s/check?for=%s' % (rules, who.address), None
        if case == 'join':
            return 'POST', '/api/entities/%s/join' % eid, {}
        if case == 'joinrules-delete':
            # a rule for each cell to delete
            if variant != 'missing':
                st, _, b = self.call('platform', 'POST', rules, rule)
                assert st == 200, (st, b)
            return 'DELETE', rules, None
        raise AssertionError(case)

    def build_webhook(self, case, variant, role, eid, n):
        """(method, path, body) of a webhook cell: an entity's endpoint or, on the platform's
        routes (variant 'any'), the platform's."""
        platform = case.startswith('platform-')
        hooks = '/api/webhooks' if platform else '/api/entities/%s/webhooks' % eid
        wid = self.webhooks[None if platform else variant]
        if case.endswith('webhooks-post'):
            return 'POST', hooks, {'url': WEBHOOK_URL, 'description': 'cell %d' % n}
        if case.endswith('webhooks-get'):
            return 'GET', hooks, None
        if case.endswith('webhook-get'):
            return 'GET', '%s/%s' % (hooks, wid), None
        if case.endswith('webhook-update'):
            return 'POST', '%s/%s/update' % (hooks, wid), {'description': 'cell %d' % n}
        if case.endswith('webhook-rotate'):
            return 'POST', '%s/%s/rotate-secret' % (hooks, wid), None
        if case.endswith('webhook-delete'):
            # A fresh endpoint for each caller who may delete it; the shared one for the others
            # (refused before it is looked up), so no entity passes its 10.
            if variant != 'missing' and role in ('admin', 'owner', 'platform'):
                st, _, b = self.call('platform', 'POST', hooks, {'url': WEBHOOK_URL})
                assert st == 201, (st, b)
                wid = b['data']['id']
            return 'DELETE', '%s/%s' % (hooks, wid), None
        raise AssertionError(case)

    def cells(self, cases):
        for method, pattern, case, rule, success in TABLE:
            if case not in cases:
                continue
            for variant, expect in rule.items():
                for role in ROLES:
                    want = expect[role]
                    yield case, variant, role, success if want == '2xx' else int(want)

    def run_cells(self, cases):
        n = 0
        for case, variant, role, want in self.cells(cases):
            n += 1
            with self.subTest('%s / %s / %s' % (case, variant, role)):
                method, path, body, port = self.build(case, variant, role)
                st, h, b = self.call(role, method, path, body, port=port)
                self.assertEqual(st, want, '%s %s as %s on a %s entity: %r' %
                                 (method, path.split('?')[0], role, variant, b))
                if want >= 400:
                    self.assertEqual(b['error']['code'], ERROR_CODES[want], b)
                    if want == 400:
                        self.assertEqual(b['error'].get('field'), 'address', b)
                elif isinstance(b, dict):
                    self.assertIs(b.get('success'), True, b)
        return n

    # ------------------------------------------------------------------------------------

    def test_table_covers_every_route(self):
        in_table = {(m, p) for m, p, _, _, _ in TABLE}
        in_source = routes_in_source()
        self.assertGreaterEqual(len(in_source), 16)
        self.assertEqual(in_source - in_table, set(), 'routes without authorization cells')
        self.assertEqual(in_table - in_source, set(), 'cells for routes that do not exist')

    def test_matrix(self):
        # Every case but revoke, which must come last (it ends the callers' signatures).
        cases = [c for _, _, c, _, _ in TABLE if c != 'revoke']
        n = self.run_cells(cases)
        self.assertGreater(n, 400)
        # The entities still have their roles and flags after the matrix.
        st, _, b = self.call('owner', 'GET', '/api/entities/%s' % self.entities['disabled'])
        self.assertEqual((st, b['data']['isEnabled']), (200, False))
        st, _, b = self.call('owner', 'GET', '/api/entities/%s' % self.entities['private'])
        self.assertEqual((st, b['data']['public']), (200, False))

    def test_zz_revoke_last(self):
        # Named to run after test_matrix: each caller revokes its own signature.
        self.run_cells(['revoke'])
        for role in ('stranger', 'owner', 'platform'):
            st, _, b = self.call(role, 'GET', '/api/skills?entityID=%s' %
                                 self.entities['public'])
            self.assertEqual(st, 401, (role, b))

    def test_level_update_recovers_caller_without_address(self):
        # AUTH_RECOVER: without address, the recovered signer is the caller.
        eid = self.entities['public']
        for role, want in (('admin', 201), ('stranger', 403)):
            st, _, b = harness.request(
                self.port, 'POST', '/api/entities/%s/levels/noaddr-%s/update?signature=%s' %
                (eid, role, self.sig[role]),
                body={'name': 'x', 'skillIds': [], 'scores': [], 'XP': 1})
            self.assertEqual(st, want, (role, b))


if __name__ == '__main__':
    harness.main()
