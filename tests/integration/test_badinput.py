"""Bad input: one table of malformed requests, each with the exact answer the contract gives.

Every row is sent on a fresh connection. The answer must be the contract's error envelope with
the row's status, error code and field (CONTRACT section 1), as strict UTF-8 JSON. When the
answer does not carry Connection: close, the same connection must go on serving (a follow-up
GET /healthz); when it does (framing errors, 413/414/431), the server must close it. Around the
whole table Redis must stay byte-for-byte unchanged (DEBUG DIGEST), although the table runs
against an entity, a skill and a level that exist, signed in as their owner."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import RawConn, chunked, scaled  # noqa: E402

MAX_BODY = 262144  # large enough for 100,000-deep nesting, small enough to overflow quickly
UUID = '7b0e4a52-3d1c-4f6e-9a8b-0c1d2e3f4a5b'
OTHER_EID = 'c-' + UUID                          # well-formed, does not exist
NOBODY = '0x' + '3' * 40
BAD_SUM = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD'   # last letter's case flipped
GOOD_SUM = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'
CURVE_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

# expected answers
def E400(field=None):
    return (400, 'invalid_request', field)


J400 = (400, 'invalid_json', None)
A401 = (401, 'unauthenticated', None)
F403 = (403, 'forbidden', None)
N404 = (404, 'not_found', None)
C409 = (409, 'conflict', None)
M405 = (405, 'method_not_allowed', None)
T413 = (413, 'payload_too_large', None)
U414 = (414, 'uri_too_long', None)
H431 = (431, 'headers_too_large', None)
U415 = (415, 'unsupported_media_type', None)


def raw(method, target, headers=(), body=b'', version='HTTP/1.1', length=True):
    """Request bytes; Content-Length added for a body unless length=False or one is given."""
    if isinstance(body, str):
        body = body.encode()
    hs = [('Host', '127.0.0.1')] + list(headers)
    if body and length and not any(k.lower() in ('content-length', 'transfer-encoding')
                                   for k, _ in hs):
        hs.append(('Content-Length', str(len(body))))
    head = '%s %s %s\r\n' % (method, target, version)
    return head.encode('latin-1') + b''.join(
        (k.encode('latin-1') if isinstance(k, str) else k) + b': ' +
        (v.encode('latin-1') if isinstance(v, str) else v) + b'\r\n' for k, v in hs) + \
        b'\r\n' + body


JSON_CT = ('Content-Type', 'application/json')


def post_json(target, body, headers=(JSON_CT,)):
    if not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    return raw('POST', target, headers, body)


def with_(base, **changes):
    d = dict(base)
    for k, v in changes.items():
        if v is DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


DROP = object()


def addr(i):
    return '0x%040x' % (i + 1)


class BadInputTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis(extra_args=['--enable-debug-command', 'yes'])
        cls.svc = cls.class_entityd(redis=cls.r, env={'MAX_BODY_BYTES': MAX_BODY})
        cls.port = cls.svc.port
        cls.owner, cls.other = harness.Wallet.random(2)
        msg, _ = harness.current_message(cls.port)
        a, s = cls.owner.sign(msg)
        cls.auth = 'address=%s&signature=%s' % (a, s)
        cls.owner_sig = s
        _, s2 = cls.other.sign(msg)
        cls.other_sig = s2
        # What the table runs against: an entity, a skill and a level of the owner.
        st, _, b = harness.request(cls.port, 'POST', '/api/entities?' + cls.auth, body={
            'name': 'Bad Input Guild', 'description': 'd', 'ownerAddresses': [a],
            'twitter': '', 'discord': '', 'website': '', 'imageUrl': '',
            'communityURLAlias': 'bad-input-guild'})
        assert st == 201, (st, b)
        cls.eid = b['data']['id']
        st, _, b = harness.request(cls.port, 'POST', '/api/skills?' + cls.auth, body={
            'name': 'Parsing', 'description': '', 'entityID': cls.eid})
        assert st == 201, (st, b)
        cls.sid = b['data']['id']
        st, _, b = harness.request(
            cls.port, 'POST', '/api/entities/%s/levels/gold/update?%s' % (cls.eid, cls.auth),
            body={'name': 'Gold', 'skillIds': [cls.sid], 'scores': [1], 'XP': 10})
        assert st == 201, (st, b)

    # ------------------------------------------------------------------------------------
    # the table

    def rows(self):
        """(name, request bytes, (status, code, field)) for every malformed request."""
        eid, sid, auth = self.eid, self.sid, self.auth
        A = lambda path: path + ('&' if '?' in path else '?') + auth  # noqa: E731
        rows = []

        def row(name, data, expect):
            rows.append((name, data, expect))

        # --- HTTP framing: 400 and the connection closes ---
        hb = [('X-Request-Id', 'framing')]
        row('content-length with transfer-encoding',
            raw('POST', A('/api/entities'), [JSON_CT, ('Content-Length', '2'),
                                              ('Transfer-Encoding', 'chunked')],
                b'2\r\n{}\r\n0\r\n\r\n'), E400())
        row('two different content-lengths',
            raw('POST', A('/api/entities'), [JSON_CT, ('Content-Length', '2'),
                                              ('Content-Length', '3')], b'{} '), E400())
        row('two equal content-lengths',
            raw('POST', A('/api/entities'), [JSON_CT, ('Content-Length', '2'),
                                              ('Content-Length', '2')], b'{}'), E400())
        row('content-length not a number',
            raw('POST', '/healthz', [('Content-Length', 'abc')]), E400())
        row('content-length negative', raw('POST', '/healthz', [('Content-Length', '-1')]),
            E400())
        row('content-length with a sign', raw('POST', '/healthz', [('Content-Length', '+2')]),
            E400())
        row('content-length overflows 64 bits',
            raw('POST', '/healthz', [('Content-Length', '9' * 30)]), E400())
        row('content-length over the body limit',
            raw('POST', A('/api/entities'), [JSON_CT, ('Content-Length', str(MAX_BODY + 1))]),
            T413)
        row('content-length 2^63', raw('POST', A('/api/entities'),
                                       [JSON_CT, ('Content-Length', str(2 ** 63))]), T413)
        row('chunk size not hex', raw('POST', A('/api/entities'),
                                      [JSON_CT, ('Transfer-Encoding', 'chunked')],
                                      b'zz\r\n{}\r\n0\r\n\r\n', length=False), E400())
        row('chunk size overflows', raw('POST', A('/api/entities'),
                                        [JSON_CT, ('Transfer-Encoding', 'chunked')],
                                        b'f' * 20 + b'\r\n{}\r\n0\r\n\r\n', length=False),
            E400())
        row('chunk size negative', raw('POST', A('/api/entities'),
                                       [JSON_CT, ('Transfer-Encoding', 'chunked')],
                                       b'-2\r\n{}\r\n0\r\n\r\n', length=False), E400())
        row('chunk longer than its size', raw('POST', A('/api/entities'),
                                              [JSON_CT, ('Transfer-Encoding', 'chunked')],
                                              b'2\r\n{}}\r\n0\r\n\r\n', length=False), E400())
        row('chunked total over the body limit',
            raw('POST', A('/api/entities'), [JSON_CT, ('Transfer-Encoding', 'chunked')],
                chunked(b' ' * (MAX_BODY + 10), [MAX_BODY // 4] * 4), length=False), T413)
        row('transfer-encoding not ending in chunked',
            raw('POST', A('/api/entities'), [JSON_CT, ('Transfer-Encoding', 'chunked, gzip')],
                b'2\r\n{}\r\n0\r\n\r\n', length=False), E400())
        row('transfer-encoding gzip only',
            raw('POST', A('/api/entities'), [JSON_CT, ('Transfer-Encoding', 'gzip')], b'{}',
                length=False), E400())
        row('bare CR in a header value (injection)',
            raw('GET', '/healthz', [('X-A', b'a\rSet-Cookie: x=1')]), E400())
        row('NUL in a header value', raw('GET', '/healthz', [('X-A', b'a\x00b')]), E400())
        row('colon-less header line', b'GET /healthz HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n',
            E400())
        row('space before the colon of Content-Length (smuggling)',
            raw('POST', '/healthz', [('Content-Length ', '2')], b'{}', length=False), E400())
        row('space before the colon of Transfer-Encoding (smuggling)',
            raw('POST', '/healthz', [('Transfer-Encoding ', 'chunked')], b'0\r\n\r\n',
                length=False), E400())
        row('bare LF line endings', b'GET /healthz HTTP/1.1\nHost: x\n\n', E400())
        row('garbage request line', b'GARBAGE\r\n\r\n', E400())
        row('unknown method', raw('FROB', '/healthz'), E400())
        row('lowercase method', raw('get', '/healthz'), E400())
        row('bad HTTP version', raw('GET', '/healthz', version='HTTP/1.x'), E400())
        row('HTTP version 1.2', raw('GET', '/healthz', version='HTTP/1.2'), E400())
        row('space inside the target', b'GET /health z HTTP/1.1\r\nHost: x\r\n\r\n', E400())
        row('NUL inside the target', b'GET /health\x00z HTTP/1.1\r\nHost: x\r\n\r\n', E400())
        row('control byte inside the target', b'GET /he\x01 HTTP/1.1\r\nHost: x\r\n\r\n',
            E400())
        row('request target over 8 KiB', raw('GET', '/healthz?x=' + 'a' * 8300), U414)
        row('header block over 16 KiB', raw('GET', '/healthz', [('X-Big', 'b' * 17000)]), H431)
        row('many headers over 16 KiB',
            raw('GET', '/healthz', [('X-H%d' % i, 'v' * 40) for i in range(500)]), H431)
        row('long header name over 16 KiB', raw('GET', '/healthz', [('X' * 17000, 'v')]), H431)

        # --- request target and routing: the connection stays open ---
        row('target without a slash', raw('GET', 'healthz'), E400())
        row('target only a query', raw('GET', '?a=1'), E400())
        row('unknown route', raw('GET', '/api/entity'), N404)
        row('route in upper case', raw('GET', '/API/SKILLS'), N404)
        row('route with an extra segment', raw('GET', A('/api/skills/multiple/x')), N404)
        row('dot segments', raw('GET', '/api/../healthz'), N404)
        row('percent-encoded route', raw('GET', '/%68ealthz'), N404)
        row('PUT on entities', raw('PUT', '/api/entities'), M405)
        row('DELETE on healthz', raw('DELETE', '/healthz'), M405)
        row('PATCH on skills', raw('PATCH', '/api/skills'), M405)
        row('GET on revoke', raw('GET', '/api/auth/revoke'), M405)
        # A level's path answers DELETE (CONTRACT section 8), so POST on it is 405.
        row('POST on a level without /update',
            raw('POST', '/api/entities/%s/levels/gold' % eid), M405)

        # --- media type ---
        row('body without content-type', raw('POST', A('/api/entities'), [], b'{}'), U415)
        row('body as text/plain', raw('POST', A('/api/entities'),
                                      [('Content-Type', 'text/plain')], b'{}'), U415)
        row('body as application/jsonx', raw('POST', A('/api/skills'),
                                             [('Content-Type', 'application/jsonx')], b'{}'),
            U415)
        row('body as application/json-patch+json',
            raw('POST', A('/api/skills'), [('Content-Type', 'application/json-patch+json')],
                b'{}'), U415)
        row('body as form', raw('POST', A('/api/skills'),
                                [('Content-Type', 'application/x-www-form-urlencoded')], b'a=1'),
            U415)
        row('body on a GET without content-type', raw('GET', '/healthz', [], b'xx'), U415)
        row('chunked body without content-type',
            raw('POST', A('/api/entities'), [('Transfer-Encoding', 'chunked')],
                chunked(b'{}', []), length=False), U415)

        # --- query strings ---
        row('bad escape in a key', raw('GET', '/api/entities/%s?%%zz=1' % eid), E400())
        row('bad escape in address', raw('GET', '/api/entities/%s?address=%%zz' % eid),
            E400('address'))
        row('truncated escape', raw('GET', '/api/entities/%s?a=%%4' % eid), E400('a'))
        row('lone percent', raw('GET', '/api/entities/%s?a=%%' % eid), E400('a'))
        row('escape of NUL', raw('GET', '/api/entities/%s?a=%%00' % eid), E400('a'))
        row('escape with a non-hex digit', raw('GET', '/api/entities/%s?a=%%G0' % eid),
            E400('a'))
        row('escape of NUL in a key', raw('GET', '/api/skills?%%00=1&' + auth), E400())
        row('repeated address',
            raw('GET', '/api/entities/%s?address=%s&address=%s' % (eid, NOBODY, NOBODY)),
            E400('address'))
        row('repeated signature', raw('GET', A('/api/skills?entityID=%s&signature=0x00' % eid)),
            E400('signature'))
        row('repeated entityID',
            raw('GET', A('/api/skills?entityID=%s&entityID=%s' % (eid, eid))), E400('entityID'))
        row('repeated under two spellings', raw('GET', '/healthz?a=1&%61=2'), E400('a'))
        row('repeated empty value', raw('GET', '/healthz?x&x'), E400('x'))
        row('repeated limit', raw('GET', A('/api/entities/%s/users?limit=1&limit=1' % eid)),
            E400('limit'))
        row('repeated multiple', raw('POST', A('/api/skills?multiple=true&multiple=true'),
                                     [JSON_CT], b'{}'), E400('multiple'))
        row('repeated key escaping CRLF (response splitting)',
            raw('GET', '/healthz?a%0d%0aSet-Cookie:+x=1&a%0d%0aSet-Cookie:+x=2'),
            E400('a\r\nSet-Cookie: x'))
        row('only separators', raw('GET', '/api/entities/%s?&&&&==&' % eid), E400('address'))
        row('700 parameters and no address',
            raw('GET', '/api/entities/%s?' % eid + '&'.join('p%d=%d' % (i, i)
                                                           for i in range(700))),
            E400('address'))
        row('address after 1,000 empty parameters, malformed',
            raw('GET', '/api/entities/%s?' % eid + '&'.join('p%d=' % i for i in range(1000)) +
                '&address=0x1'), E400('address'))

        # --- ids in the path: 404 ---
        for name, bad in [('not an id', 'not-an-id'), ('upper-case uuid', 'c-' + UUID.upper()),
                          ('uuid version 1', 'c-7b0e4a52-3d1c-1f6e-9a8b-0c1d2e3f4a5b'),
                          ('bad variant', 'c-7b0e4a52-3d1c-4f6e-7a8b-0c1d2e3f4a5b'),
                          ('skill prefix', 's-' + UUID), ('no prefix', UUID),
                          ('one char longer', eid + '0'), ('percent-encoded', eid[:-1] + '%62'),
                          ('trailing dot', eid + '.')]:
            row('entity path id: ' + name,
                raw('GET', '/api/entities/%s?address=%s' % (bad, NOBODY)), N404)
        row('users path id', raw('GET', A('/api/entities/c-1/users')), N404)
        row('force-add path id', post_json(A('/api/entities/c-%s/force-add' % UUID.upper()),
                                           {'addresses': [NOBODY], 'Chain': 'eth'}), N404)
        row('admins path id', raw('GET', A('/api/entities/%s/admins' % UUID)), N404)
        row('admins POST path id', post_json(A('/api/entities/x/admins'),
                                             {'addresses': [NOBODY]}), N404)
        row('admin delete: bad entity id',
            raw('DELETE', A('/api/entities/c-x/admins/%s' % NOBODY)), N404)
        row('admin delete: short address',
            raw('DELETE', A('/api/entities/%s/admins/0x1234' % eid)), N404)
        row('admin delete: bad checksum',
            raw('DELETE', A('/api/entities/%s/admins/%s' % (eid, BAD_SUM))), N404)
        row('admin delete: no 0x', raw('DELETE', A('/api/entities/%s/admins/%s' %
                                                    (eid, '3' * 40))), N404)
        level_body = {'name': 'L', 'skillIds': [sid], 'scores': [1], 'XP': 1}
        row('level: bad entity id',
            post_json(A('/api/entities/%s/levels/gold/update' % UUID), level_body), N404)
        row('level: id with a dot',
            post_json(A('/api/entities/%s/levels/lv.1/update' % eid), level_body), N404)
        row('level: id of 65 characters',
            post_json(A('/api/entities/%s/levels/%s/update' % (eid, 'a' * 65)), level_body),
            N404)
        row('level: id percent-encoded',
            post_json(A('/api/entities/%s/levels/a%%20b/update' % eid), level_body), N404)

        # --- ids in the query or body: 400 ---
        row('skills: entityID missing', raw('GET', A('/api/skills')), E400('entityID'))
        row('skills: entityID malformed', raw('GET', A('/api/skills?entityID=c-1')),
            E400('entityID'))
        row('skills: entityID upper case',
            raw('GET', A('/api/skills?entityID=c-' + UUID.upper())), E400('entityID'))
        row('skills: entityID empty', raw('GET', A('/api/skills?entityID=')), E400('entityID'))

        # --- sign-in: addresses and signatures ---
        e_path = '/api/entities/%s' % eid
        row('address missing', raw('GET', e_path), E400('address'))
        row('address missing, signature given',
            raw('GET', A('/api/skills?entityID=%s' % eid).replace('address=', 'x=')),
            E400('address'))
        for name, bad in [('too short', '0x1234'), ('41 digits', '0x' + '1' * 41),
                          ('no 0x', '1' * 40), ('0X prefix', '0X' + '1' * 40),
                          ('non-hex', '0x' + 'g' * 40), ('bad EIP-55 checksum', BAD_SUM),
                          ('spaces', '+0x' + '1' * 40),
                          ('escaped NUL inside', '0x11%00' + '1' * 38)]:
            row('address ' + name, raw('GET', '%s?address=%s' % (e_path, bad)), E400('address'))
        row('signature missing on a required route',
            raw('GET', '/api/skills?entityID=%s&address=%s' % (eid, self.owner.address)), A401)
        row('signature empty', raw('GET', '/api/skills?entityID=%s&address=%s&signature=' %
                                   (eid, self.owner.address)), A401)
        row('signature missing on revoke',
            raw('POST', '/api/auth/revoke?address=%s' % self.owner.address), A401)
        row('signature missing on a level update (address optional)',
            post_json('/api/entities/%s/levels/gold/update' % eid, level_body), A401)
        s = self.owner_sig[2:]
        r_, s_, v_ = harness.split_signature(self.owner_sig)
        # (130 digits without v would be 128: a valid EIP-2098 compact signature, not bad.)
        for name, bad in [('not hex', '0x' + 'zz' * 65), ('too short', '0x' + s[:-4]),
                          ('too long', '0x' + s + '00'), ('129 digits', '0x' + s[:-1]),
                          ('v = 29', '0x' + s[:-2] + '1d'), ('v = 2', '0x' + s[:-2] + '02'),
                          ('r = 0', harness.join_signature(0, s_, v_)),
                          ('s = 0', harness.join_signature(r_, 0, v_)),
                          ('s = n', harness.join_signature(r_, CURVE_N, v_)),
                          ('high s', harness.high_s(self.owner_sig)),
                          ('another wallet', self.other_sig),
                          ('r flipped', harness.join_signature(r_ ^ 1, s_, v_)),
                          ('upper-case 0X', '0X' + s)]:
            row('signature ' + name, raw('GET', '/api/skills?entityID=%s&address=%s&signature=%s'
                                         % (eid, self.owner.address, bad)), A401)
        row('signature bad on an optional route (get entity)',
            raw('GET', '%s?address=%s&signature=0x%s' % (e_path, self.owner.address, 'ab' * 3)),
            A401)
        row('signature of another wallet on get entity',
            raw('GET', '%s?address=%s&signature=%s' % (e_path, self.owner.address,
                                                       self.other_sig)), A401)
        row('signature malformed on a level update without address',
            post_json('/api/entities/%s/levels/gold/update?signature=0x1234' % eid, level_body),
            A401)

        # --- users page parameters ---
        u = '/api/entities/%s/users' % eid
        for name, v in [('0', '0'), ('1001', '1001'), ('negative', '-1'), ('text', 'ten'),
                        ('empty', ''), ('fraction', '1.5'), ('huge', '9' * 30),
                        ('trailing junk', '10x'), ('hex', '0x10')]:
            row('limit ' + name, raw('GET', A(u + '?limit=' + v)), E400('limit'))
        for name, v in [('not hex', 'zz'), ('short', '30' * 10), ('odd length', '3' * 117),
                        ('valid hex of junk', '41' * 59)]:
            row('cursor ' + name, raw('GET', A(u + '?cursor=' + v)), E400('cursor'))

        # --- bodies that are not JSON objects: every write route ---
        write_routes = [
            ('entities', A('/api/entities')),
            ('force-add', A('/api/entities/%s/force-add' % eid)),
            ('admins', A('/api/entities/%s/admins' % eid)),
            ('skills', A('/api/skills')),
            ('skills multiple', A('/api/skills/multiple')),
            ('level', A('/api/entities/%s/levels/gold/update' % eid)),
        ]
        deep = b'[' * 100000 + b']' * 100000
        not_json = [
            ('empty', b''), ('truncated', b'{"name":'), ('array', b'[]'), ('null', b'null'),
            ('number', b'1'), ('string', b'"x"'), ('trailing garbage', b'{}x'),
            ('two objects', b'{}{}'), ('invalid UTF-8', b'{"name":"\xff\xfe"}'),
            ('overlong UTF-8', b'{"name":"\xc0\xaf"}'), ('lone surrogate', b'{"a":"\\ud800"}'),
            ('escaped NUL', b'{"name":"a\\u0000b"}'), ('raw NUL', b'{"name":"a\x00b"}'),
            ('raw control character', b'{"name":"a\x01b"}'),
            ('nesting 100,000 deep', b'{"a":' + deep + b'}'),
            ('huge integer', b'{"XP":123456789012345678901234567890}'),
            ('huge real', b'{"__v":1e999}'), ('NaN', b'{"__v":NaN}'),
            ('single quotes', b"{'name':'x'}"), ('comment', b'{/* c */}'),
            ('BOM', b'\xef\xbb\xbf{}'), ('duplicate key', b'{"name":"a","name":"b"}'),
            ('unquoted key', b'{name:1}'), ('trailing comma', b'{"a":1,}'),
        ]
        for rname, target in write_routes:
            for bname, body in not_json:
                if bname == 'empty':
                    data = raw('POST', target, [JSON_CT, ('Content-Length', '0')])
                else:
                    data = post_json(target, body)
                row('%s body: %s' % (rname, bname), data, J400)
        row('level body nested 100,000 deep only', post_json(write_routes[5][1], deep), J400)

        # --- every write route, every field, wrong types and values ---
        ent = {'name': 'N', 'description': 'D', 'ownerAddresses': [self.owner.address],
               'twitter': '', 'discord': '', 'website': '', 'imageUrl': ''}
        create = A('/api/entities')
        update = A('/api/entities?entityID=%s' % eid)
        wrong = [('a number', 5), ('null', None), ('an array', []), ('an object', {}),
                 ('a boolean', True)]
        for f in ['name', 'description', 'twitter', 'discord', 'website', 'imageUrl']:
            row('entity create: %s missing' % f, post_json(create, with_(ent, **{f: DROP})),
                E400(f))
            for wname, v in wrong:
                row('entity create: %s is %s' % (f, wname),
                    post_json(create, with_(ent, **{f: v})), E400(f))
            row('entity update: %s is a number' % f, post_json(update, with_(ent, **{f: 1})),
                E400(f))
        for f in ['telegram', 'instagram', 'openseaSlug', 'defaultDyNftThemeId', 'bannerUrl',
                  'communityURLAlias']:
            for wname, v in wrong[:1] + wrong[2:]:
                row('entity create: %s is %s' % (f, wname),
                    post_json(create, with_(ent, **{f: v})), E400(f))
        long_cases = [
            ('name 101 characters', 'name', 'n' * 101),
            ('name 101 two-byte characters', 'name', '\u00e9' * 101),
            ('name only spaces', 'name', '   '), ('name empty', 'name', ''),
            ('name with a control character', 'name', 'a\u0001b'),
            ('name with a newline', 'name', 'a\nb'), ('name with DEL', 'name', 'a\u007fb'),
            ('description 5001 characters', 'description', 'd' * 5001),
            ('description with a bell', 'description', 'ring\u0007'),
            ('twitter 201 characters', 'twitter', 't' * 201),
            ('discord with a control character', 'discord', 'x\u001by'),
            ('telegram 201 characters', 'telegram', 't' * 201),
            ('website 2049 characters', 'website', 'https://a.example/' + 'p' * 2031),
            ('website not http', 'website', 'ftp://a.example'),
            ('website javascript', 'website', 'javascript:alert(1)'),
            ('website without host', 'website', 'https://'),
            ('website relative', 'website', '/relative'),
            ('website with a space', 'website', 'https://a.example/a b'),
            ('imageUrl no scheme', 'imageUrl', 'a.example/x.png'),
            ('bannerUrl data URL', 'bannerUrl', 'data:image/png;base64,AAAA'),
            ('communityURLAlias upper case', 'communityURLAlias', 'Acme'),
            ('communityURLAlias too short', 'communityURLAlias', 'ab'),
            ('communityURLAlias 65 characters', 'communityURLAlias', 'a' * 65),
            ('communityURLAlias with a space', 'communityURLAlias', 'a b c'),
            ('communityURLAlias with a slash', 'communityURLAlias', 'a/b/c'),
        ]
        for name, f, v in long_cases:
            row('entity create: ' + name, post_json(create, with_(ent, **{f: v})), E400(f))
        owner_cases = [
            ('missing', DROP, 'ownerAddresses'), ('a string', self.owner.address, 'ownerAddresses'),
            ('empty', [], 'ownerAddresses'), ('an object', {}, 'ownerAddresses'),
            ('51 addresses', [addr(i) for i in range(51)], 'ownerAddresses'),
            ('a number inside', [5], 'ownerAddresses[0]'),
            ('null inside', [self.owner.address, None], 'ownerAddresses[1]'),
            ('short address', [self.owner.address, '0x12'], 'ownerAddresses[1]'),
            ('bad checksum', [addr(0), addr(1), BAD_SUM], 'ownerAddresses[2]'),
            ('an array inside', [[self.owner.address]], 'ownerAddresses[0]'),
        ]
        for name, v, field in owner_cases:
            row('entity create: ownerAddresses ' + name,
                post_json(create, with_(ent, ownerAddresses=v)), E400(field))
        contract_cases = [
            ('a number', 5, 'contracts'), ('an object', {}, 'contracts'),
            ('null', None, 'contracts'),
            ('a number inside', [1], 'contracts[0]'), ('bad string', '0xbad', 'contracts[0]'),
            ('bad second in CSV', GOOD_SUM + ',0x12', 'contracts[1]'),
            ('bad checksum in array', [GOOD_SUM, BAD_SUM], 'contracts[1]'),
            ('1001 addresses', [addr(i) for i in range(1001)], 'contracts'),
        ]
        for name, v, field in contract_cases:
            row('entity create: contracts ' + name,
                post_json(create, with_(ent, contracts=v)), E400(field))
        for f in ['public', 'isEnabled']:
            for name, v in [('a string', 'true'), ('a number', 1), ('null', None)]:
                row('entity create: %s is %s' % (f, name), post_json(create, with_(ent, **{f: v})),
                    E400(f))
        for name, v in [('a string', '0'), ('negative', -1), ('a fraction', 1.5),
                        ('a boolean', True), ('null', None)]:
            row('entity update: __v is ' + name,
                post_json(update, with_(ent, __v=v)), E400('__v'))
        for name, v in [('a number', 5), ('malformed', 'c-1'), ('upper case', 'c-' + UUID.upper()),
                        ('a skill id', sid)]:
            row('entity update: body id ' + name, post_json(create, with_(ent, id=v)), E400('id'))
        row('entity update: query entityID malformed',
            post_json(A('/api/entities?entityID=c-x'), ent), E400('entityID'))
        row('entity update: body id and entityID differ',
            post_json(A('/api/entities?entityID=%s' % eid), with_(ent, id=OTHER_EID)), E400('id'))
        row('entity create: isEnabled by a non-platform caller',
            post_json(create, with_(ent, isEnabled=False)), F403)

        fa = A('/api/entities/%s/force-add' % eid)
        fa_ok = {'addresses': [NOBODY], 'Chain': 'eth'}
        for name, v, field in [
                ('missing', DROP, 'addresses'), ('a string', NOBODY, 'addresses'),
                ('empty', [], 'addresses'), ('null', None, 'addresses'),
                ('1001 addresses', [addr(i) for i in range(1001)], 'addresses'),
                ('a number inside', [NOBODY, 7], 'addresses[1]'),
                ('bad checksum inside', [BAD_SUM], 'addresses[0]'),
                ('an empty string inside', [''], 'addresses[0]')]:
            row('force-add: addresses ' + name, post_json(fa, with_(fa_ok, addresses=v)),
                E400(field))
        for name, v in [('missing', DROP), ('a number', 5), ('empty', ''), ('with a space', 'a b'),
                        ('33 characters', 'c' * 33), ('with a dot', 'eth.main'), ('null', None),
                        ('an array', ['eth'])]:
            row('force-add: Chain ' + name, post_json(fa, with_(fa_ok, Chain=v)), E400('Chain'))
        row('force-add: lower-case chain invalid',
            post_json(fa, {'addresses': [NOBODY], 'chain': 'a b'}), E400('Chain'))

        ad = A('/api/entities/%s/admins' % eid)
        for name, v, field in [
                ('missing', DROP, 'addresses'), ('a string', NOBODY, 'addresses'),
                ('empty', [], 'addresses'), ('101 addresses', [addr(i) for i in range(101)],
                                            'addresses'),
                ('a number inside', [3], 'addresses[0]'),
                ('short inside', [NOBODY, '0x1'], 'addresses[1]')]:
            row('admins: addresses ' + name, post_json(ad, with_({'addresses': [NOBODY]},
                                                                 addresses=v)), E400(field))

        sk = A('/api/skills')
        sk_ok = {'name': 'New skill', 'description': '', 'entityID': eid}
        for name, v in [('missing', DROP), ('a number', 5), ('malformed', 'c-x'), ('null', None)]:
            row('skill: entityID ' + name, post_json(sk, with_(sk_ok, entityID=v)),
                E400('entityID'))
        for name, v in [('missing', DROP), ('a number', 5), ('empty', ''), ('spaces', '  '),
                        ('101 characters', 's' * 101), ('null', None), ('a control', 'a\u0002')]:
            row('skill: name ' + name, post_json(sk, with_(sk_ok, name=v)), E400('name'))
        for name, v in [('a number', 5), ('5001 characters', 'd' * 5001), ('an array', [])]:
            row('skill: description ' + name, post_json(sk, with_(sk_ok, description=v)),
                E400('description'))
        mul = A('/api/skills/multiple')
        mul_ok = {'names': ['a', 'b'], 'descriptions': ['', ''], 'entityID': eid}
        for name, v, field in [
                ('missing', DROP, 'names'), ('a number', 5, 'names'), ('empty', [], 'names'),
                ('a string that is no array', 'a,b', 'names'), ('101 names', ['n%d' % i for i in
                                                                              range(101)], 'names'),
                ('a number inside', ['a', 1], 'names[1]'), ('an empty name', ['', 'b'], 'names[0]'),
                ('a string holding a bad item', '["a", 2]', 'names[1]'),
                ('an object', {}, 'names')]:
            row('skills multiple: names ' + name, post_json(mul, with_(mul_ok, names=v)),
                E400(field))
        for name, v, field in [
                ('fewer', [''], 'descriptions'), ('more', ['', '', ''], 'descriptions'),
                ('a number', 5, 'descriptions'), ('a number inside', ['', 5], 'descriptions[1]'),
                ('a string that is no array', 'x', 'descriptions')]:
            row('skills multiple: descriptions ' + name,
                post_json(mul, with_(mul_ok, descriptions=v)), E400(field))
        row('skills multiple: entityID missing', post_json(mul, with_(mul_ok, entityID=DROP)),
            E400('entityID'))
        row('skills multiple: duplicate names in one request',
            post_json(mul, with_(mul_ok, names=['Same', ' same '])), C409)
        row('skills: names via ?multiple=true malformed',
            post_json(A('/api/skills?multiple=true'), with_(mul_ok, names=7)), E400('names'))

        lv = A('/api/entities/%s/levels/gold/update' % eid)
        lv_ok = {'name': 'Gold', 'description': '', 'skillIds': [sid], 'scores': [1], 'XP': 10,
                 'endsAt': ''}
        for name, f, v, field in [
                ('name missing', 'name', DROP, 'name'), ('name a number', 'name', 1, 'name'),
                ('name empty', 'name', '', 'name'), ('description a number', 'description', 1,
                                                    'description'),
                ('skillIds missing', 'skillIds', DROP, 'skillIds'),
                ('scores missing', 'scores', DROP, 'scores'),
                ('skillIds a number', 'skillIds', 5, 'skillIds'),
                ('skillIds an object', 'skillIds', {}, 'skillIds'),
                ('scores an object', 'scores', {}, 'scores'),
                ('skillIds malformed', 'skillIds', ['s-1'], 'skillIds[0]'),
                ('skillIds an entity id', 'skillIds', [eid], 'skillIds[0]'),
                ('skillIds a number inside', 'skillIds', [5], 'skillIds[0]'),
                ('skillIds 101', 'skillIds', [sid] * 101, 'skillIds'),
                ('scores negative', 'scores', [-1], 'scores[0]'),
                ('scores a fraction', 'scores', [1.5], 'scores[0]'),
                ('scores text', 'scores', ['ten'], 'scores[0]'),
                ('scores over 2^53-1', 'scores', [2 ** 53], 'scores[0]'),
                ('scores CSV with junk', 'scores', '1x', 'scores[0]'),
                ('scores longer', 'scores', [1, 2], 'scores'),
                ('scores shorter', 'scores', [], 'scores'),
                ('XP missing', 'XP', DROP, 'XP'), ('XP negative', 'XP', -1, 'XP'),
                ('XP 2^53', 'XP', 2 ** 53, 'XP'), ('XP text', 'XP', 'abc', 'XP'),
                ('XP a fraction', 'XP', 1.5, 'XP'), ('XP a boolean', 'XP', True, 'XP'),
                ('XP null', 'XP', None, 'XP'), ('XP 17 digits', 'XP', '1' * 17, 'XP'),
                ('endsAt text', 'endsAt', 'tomorrow', 'endsAt'),
                ('endsAt a number', 'endsAt', 5, 'endsAt'),
                ('endsAt month 13', 'endsAt', '2026-13-01T00:00:00Z', 'endsAt'),
                ('endsAt February 30', 'endsAt', '2026-02-30T00:00:00Z', 'endsAt'),
                ('endsAt without zone', 'endsAt', '2026-01-01T00:00:00', 'endsAt'),
                ('endsAt second 60', 'endsAt', '2026-01-01T00:00:60Z', 'endsAt')]:
            row('level: ' + name, post_json(lv, with_(lv_ok, **{f: v})), E400(field))
        return rows

    # ------------------------------------------------------------------------------------

    def check_row(self, name, data, expect, rid):
        status, code, field = expect
        c = RawConn(self.port, timeout=scaled(10))
        try:
            try:
                c.send(data)
            except OSError:
                pass  # the server may answer and close before it has read everything
            resp = c.read_response(timeout=scaled(10))
            self.assertEqual(resp.status, status, '%s: %r' % (name, resp.body[:300]))
            try:
                text = resp.body.decode('utf-8')  # strict: the contract says UTF-8 JSON
            except UnicodeDecodeError:
                self.fail('%s: the body is not UTF-8: %r' % (name, resp.body[:300]))
            self.assertIsInstance(resp.json, dict, '%s: body %r' % (name, text[:300]))
            self.assertEnvelope(resp, status, code, field)
            if status == 405:
                self.assertTrue(resp.headers.get('allow'), name)
            self.assertNotIn('set-cookie', resp.headers, name)
            if resp.headers.get('connection', '').lower() == 'close':
                self.assertIn(status, (400, 413, 414, 431),
                              '%s: closed after a %d' % (name, status))
                self.assertIsNotNone(c.wait_closed(scaled(5)),
                                     '%s: Connection: close but the server kept it open' % name)
            else:
                # The connection must go on serving.
                c.send(harness.http_request_bytes('GET', '/healthz', {'X-Request-Id': rid}))
                follow = c.read_response(timeout=scaled(10))
                self.assertEqual((follow.status, follow.headers.get('x-request-id')), (200, rid),
                                 '%s: the follow-up on the same connection failed' % name)
        finally:
            c.close()

    def test_table(self):
        rows = self.rows()
        self.assertGreaterEqual(len(rows), 150)
        names = [r[0] for r in rows]
        self.assertEqual(len(names), len(set(names)), 'row names must be unique')
        digest = self.r.cli('DEBUG', 'DIGEST')
        keys_before = sorted(self.r.cli('KEYS', '*'))
        t0 = time.monotonic()
        for i, (name, data, expect) in enumerate(rows):
            with self.subTest(name):
                self.check_row(name, data, expect, 'follow-%d' % i)
        elapsed = time.monotonic() - t0
        # The service is still healthy, and Redis is byte-for-byte what it was.
        self.assertEqual(harness.request(self.port, 'GET', '/readyz')[0], 200)
        self.assertEqual(sorted(self.r.cli('KEYS', '*')), keys_before)
        self.assertEqual(self.r.cli('DEBUG', 'DIGEST'), digest,
                         'a rejected request changed Redis')
        sys.stderr.write('\n%d malformed requests in %.1fs\n' % (len(rows), elapsed))

    def test_head_has_no_body(self):
        # A response to HEAD carries no body (RFC 9110 9.3.2): the next response on the
        # connection must start right after the header block.
        c = RawConn(self.port, timeout=scaled(10))
        self.addCleanup(c.close)
        c.send(harness.http_request_bytes('HEAD', '/healthz', {'X-Request-Id': 'head-1'}))
        deadline = time.monotonic() + scaled(5)
        while b'\r\n\r\n' not in c.buf and time.monotonic() < deadline:
            c._fill(deadline)
        head, _, rest = c.buf.partition(b'\r\n\r\n')
        self.assertTrue(head.startswith(b'HTTP/1.1 '), head)
        status = int(head.split(b' ')[1])
        self.assertIn(status, (200, 405), head)
        c.buf = rest
        c.send(harness.http_request_bytes('GET', '/healthz', {'X-Request-Id': 'head-2'}))
        time.sleep(0.2)
        c._fill(time.monotonic() + scaled(5))
        self.assertTrue(c.buf.startswith(b'HTTP/1.1 200'),
                        'bytes after the HEAD response: %r' % c.buf[:120])

    def assertUtf8Envelope(self, data, status, code):
        """The raw answer to data: status and code, a strict UTF-8 JSON body."""
        c = RawConn(self.port, timeout=scaled(10))
        self.addCleanup(c.close)
        c.send(data)
        resp = c.read_response()
        self.assertEqual(resp.status, status, resp.body[:300])
        try:
            body = json.loads(resp.body.decode('utf-8'))
        except (UnicodeDecodeError, ValueError) as e:
            self.fail('the %d body is not UTF-8 JSON (%s): %r' % (status, e, resp.body[:300]))
        self.assertEqual(body['error']['code'], code, body)
        return body

    def test_invalid_json_message_is_utf8(self):
        # jansson quotes the offending input in its error text ("invalid escape near ...");
        # the answer must still be UTF-8 JSON when that input is not UTF-8.
        for body in (b'{"a\\\xff":1}', b'{"\\":\\\xde\x96\xdd\xcd\\', b'[1, \xff]'):
            with self.subTest(body=body):
                self.assertUtf8Envelope(post_json('/api/skills?' + self.auth, body), 400,
                                        'invalid_json')

    def test_query_key_not_utf8_is_named_in_utf8(self):
        # A repeated or badly escaped parameter is named in "field": bytes that are not UTF-8
        # must not reach the JSON answer as they are.
        for target in ('/healthz?%ff=1&%ff=2', '/healthz?%c3%28=1&%c3%28=2',
                       '/healthz?%ed%a0%80=1&%ed%a0%80=2', '/healthz?%fe=%zz'):
            with self.subTest(target=target):
                body = self.assertUtf8Envelope(raw('GET', target), 400, 'invalid_request')
                self.assertIsInstance(body['error'].get('field', ''), str)

    def test_slow_malformed_body_does_not_block_others(self):
        # A malformed chunked body trickling in keeps only its own connection busy.
        c = RawConn(self.port, timeout=scaled(10))
        self.addCleanup(c.close)
        c.send(raw('POST', '/api/skills?' + self.auth,
                   [JSON_CT, ('Transfer-Encoding', 'chunked')], b'', length=False))
        c.send(b'5\r\n{"na')
        t0 = time.monotonic()
        st, _, _ = harness.request(self.port, 'GET', '/healthz')
        self.assertEqual(st, 200)
        # Blocked would mean the header or idle timeout (10 s, 60 s): far above this bound.
        self.assertLess(time.monotonic() - t0, scaled(2))
        c.send(b'\r\nzz\r\n')
        self.assertEnvelope(c.read_response(), 400, 'invalid_request')


if __name__ == '__main__':
    harness.main()
