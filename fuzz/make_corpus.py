#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ (committed; rerun after changing this file).

Each seed is one input of the target: byte 0 is the target's selector (fuzz_http: chunking seed;
fuzz_json: route and caller; fuzz_sig: parser), the rest the text. Names are content hashes."""

import hashlib
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
EID = 'c-7b0e4a52-3d1c-4f6e-9a8b-0c1d2e3f4a5b'
SID = 's-0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b'
ADDR = '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed'
ADDR_SUM = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'
SIG = '0x' + '1b' * 32 + '2c' * 32 + '1b'
SIG_V0 = '0x' + '1b' * 32 + '2c' * 32 + '00'
COMPACT = '0x' + '1b' * 32 + 'ac' + '2c' * 31
AUTH = 'address=%s&signature=%s' % (ADDR, SIG)


def req(method, target, headers=(), body=b'', version='HTTP/1.1'):
    if isinstance(body, str):
        body = body.encode()
    h = ['Host: x'] + list(headers)
    if body and not any(x.lower().startswith(('content-length', 'transfer-encoding')) for x in h):
        h.append('Content-Length: %d' % len(body))
    return ('%s %s %s\r\n' % (method, target, version) + ''.join(x + '\r\n' for x in h) +
            '\r\n').encode() + body


def chunked(body, size=7):
    body = body.encode() if isinstance(body, str) else body
    out = b''
    for i in range(0, len(body), size):
        part = body[i:i + size]
        out += b'%x\r\n%s\r\n' % (len(part), part)
    return out + b'0\r\n\r\n'


JSON = 'Content-Type: application/json'
ENTITY = {'name': 'Acme', 'description': 'Builders', 'ownerAddresses': [ADDR],
          'twitter': '@acme', 'discord': '', 'website': 'https://acme.example', 'imageUrl': ''}


def http_seeds():
    e = json.dumps(ENTITY)
    seeds = [
        req('GET', '/healthz'),
        req('GET', '/readyz') + req('GET', '/metrics') + req('GET', '/api/auth/message'),
        req('GET', '/api//skills/?entityID=%s&%s' % (EID, AUTH)),
        req('GET', '/api/entities/%s?address=%s' % (EID, ADDR), ['X-Request-Id: abc-123']),
        req('GET', '/api/entities/%s/users?%s&limit=5&cursor=%s' % (EID, AUTH, '30' * 59)),
        req('GET', '/api/entities/%s/admins?%s' % (EID, AUTH)),
        req('POST', '/api/entities?%s' % AUTH, [JSON], e),
        req('POST', '/api/entities?%s&entityID=%s' % (AUTH, EID),
            [JSON, 'Transfer-Encoding: chunked'], chunked(e)),
        req('POST', '/api/entities/%s/force-add?%s' % (EID, AUTH),
            [JSON, 'Expect: 100-continue'], json.dumps({'addresses': [ADDR], 'Chain': 'eth'})),
        req('POST', '/api/entities/%s/admins?%s' % (EID, AUTH), [JSON + '; charset=utf-8'],
            json.dumps({'addresses': [ADDR]})),
        req('DELETE', '/api/entities/%s/admins/%s?%s' % (EID, ADDR, AUTH)),
        req('POST', '/api/skills?%s' % AUTH, [JSON],
            json.dumps({'name': 'Rust', 'description': '', 'entityID': EID})),
        req('POST', '/api/skills/multiple?%s' % AUTH, [JSON],
            json.dumps({'names': ['a', 'b'], 'descriptions': '["x","y"]', 'entityID': EID})),
        req('POST', '/api/entities/%s/levels/gold_1/update?signature=%s' % (EID, COMPACT), [JSON],
            json.dumps({'name': 'Gold', 'skillIds': SID, 'scores': '3', 'XP': '100',
                        'endsAt': '2027-01-01T00:00:00+02:00'})),
        req('POST', '/api/auth/revoke?address=%s&signature=%s' % (ADDR_SUM, SIG_V0)),
        req('GET', '/healthz', ['Connection: close']) + req('GET', '/healthz'),
        req('GET', '/healthz', version='HTTP/1.0'),
        req('GET', '/healthz', ['Connection: Upgrade', 'Upgrade: websocket']),
        req('GET', '/api/skills?entityID=%zz&a=1&a=2'),
        req('GET', '/api/skills?x=%00&y=+%41'),
        req('POST', '/healthz', ['Content-Length: 3', 'Transfer-Encoding: chunked'], b'abc'),
        req('POST', '/api/entities?%s' % AUTH, ['Content-Length: 2', 'Content-Length: 3'], b'{}'),
        req('POST', '/api/entities?%s' % AUTH, [JSON, 'Transfer-Encoding: chunked'],
            b'zz\r\n{}\r\n0\r\n\r\n'),
        req('POST', '/api/entities?%s' % AUTH, [JSON], '{"name":'),
        req('POST', '/api/entities?%s' % AUTH, ['Content-Type: text/plain'], '{}'),
        req('PUT', '/api/skills'),
        req('GET', '/' + 'a' * 8300),
        req('GET', '/healthz', ['X-Big: ' + 'b' * 16500]),
        req('POST', '/api/entities?%s' % AUTH, [JSON, 'Content-Length: 99999999']),
    ]
    # Byte 0 seeds the chunking: a few different ones.
    return [bytes([i * 37 % 256]) + s for i, s in enumerate(seeds)]


def json_seeds():
    out = []
    bodies = {
        0: [ENTITY, dict(ENTITY, contracts=ADDR + ',' + ADDR_SUM, public=False,
                         communityURLAlias='acme-guild', openseaSlug='acme', telegram='t',
                         instagram='i', defaultDyNftThemeId='d', bannerUrl='http://b.example/x'),
            dict(ENTITY, isEnabled=False, __v=3)],
        1: [dict(ENTITY, id=EID, __v=0), dict(ENTITY, contracts=[ADDR], communityURLAlias='')],
        2: [{'addresses': [ADDR, ADDR_SUM], 'Chain': 'eth'}, {'addresses': [ADDR], 'chain': 'p_1'}],
        3: [{'addresses': [ADDR]}],
        4: [{'name': 'Rust', 'description': 'systems', 'entityID': EID},
            {'names': ['a', 'b'], 'entityID': EID}],
        5: [{'names': '["a","b"]', 'descriptions': '["",""]', 'entityID': EID}],
        6: [{'names': ['Go', 'C'], 'descriptions': ['x', 'y'], 'entityID': EID}],
        7: [{'name': 'Gold', 'description': 'd', 'skillIds': [SID], 'scores': [5], 'XP': 100,
             'endsAt': ''},
            {'name': 'Gold', 'skillIds': '["%s"]' % SID, 'scores': '["5"]',
             'XP': '9007199254740991', 'endsAt': '2026-11-21T22:47:26.123Z'},
            {'name': 'Gold', 'skillIds': SID + ', ' + SID, 'scores': '1,2', 'XP': 0}],
        # bit 4: the contribution routes (award, revoke)
        16: [{'member': ADDR, 'skills': [{'skillId': SID, 'score': 5}], 'xp': 10, 'title': 't',
              'url': 'https://e.example/1', 'idempotencyKey': 'k-1'},
             {'contributions': [{'member': ADDR_SUM, 'title': 'a', 'xp': 1},
                                {'member': ADDR, 'title': 'b', 'skills': []}],
              'idempotencyKey': 'batch_1'}],
        17: [{'reason': 'Awarded twice.'}],
    }
    for route, bs in bodies.items():
        for i, b in enumerate(bs):
            caller = 8 if i % 2 else 0
            out.append(bytes([route | caller]) + json.dumps(b).encode())
    out.append(bytes([0]) + b'{"name": "\\u0000", "a": [[[[[[1]]]]]], "n": 1e999}')
    out.append(bytes([2]) + b'[]')
    return out


def sig_seeds():
    texts = {
        0: [ADDR, ADDR_SUM, ADDR.upper().replace('0X', '0x'), '0x' + '0' * 39],
        1: [SIG, SIG_V0, COMPACT, SIG[2:], '0x' + 'ff' * 65],
        2: ['00ff', 'abCD', 'zz'],
        3: ['2026-11-21T22:47:26.123Z', '2024-02-29T23:59:59+05:30', '0000-01-01T00:00:00Z',
            '9999-12-31T23:59:59.999999-0130'],
        4: [EID, SID, 'level_1-A'],
        5: ['address=%s&signature=%s&limit=5' % (ADDR, SIG), 'a=%41%42&b=+c&a', '=&&x='],
    }
    out = []
    for sel, ts in texts.items():
        for t in ts:
            out.append(bytes([sel | (0x80 if sel == 1 else 0)]) + t.encode())
    return out


def write(target, seeds):
    d = os.path.join(HERE, 'corpus', target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for s in seeds:
        with open(os.path.join(d, hashlib.sha1(s).hexdigest()), 'wb') as f:
            f.write(s)


def resp_seeds():
    """Replies entityd reads: an entity HMGET, a transaction's EXEC, a users page, errors,
    nils, integers, nesting, and replies cut short."""
    ent = '{"id":"%s","name":"n"}' % EID
    entry = '0001700000000000:%s:%s:ETH' % (ADDR, ADDR)
    bulk = lambda s: '$%d\r\n%s\r\n' % (len(s.encode()), s)
    arr = lambda *xs: '*%d\r\n' % len(xs) + ''.join(xs)
    hmget = arr(bulk(ent), bulk('1'), bulk('1'), '$-1\r\n')
    replies = [
        hmget,
        arr(hmget, ':0\r\n', ':1\r\n', ':0\r\n'),
        arr(arr(bulk(EID), bulk('1'), bulk('1'), bulk('v1')), arr(*[bulk(entry)] * 3), ':3\r\n'),
        '-NOSCRIPT No matching script\r\n',
        arr(hmget, '-ERR wrong type\r\n'),
        ':1\r\n', '$-1\r\n', '*-1\r\n', '+OK\r\n', '*0\r\n',
        arr(arr(arr(arr(':1\r\n')))),
        hmget[:-7],
        ':1\r\n+OK\r\n' + hmget,
    ]
    return [bytes([i]) + r.encode() for i, r in enumerate(replies)]


if __name__ == '__main__':
    write('fuzz_resp', resp_seeds())
    write('fuzz_http', http_seeds())
    write('fuzz_json', json_seeds())
    write('fuzz_sig', sig_seeds())
