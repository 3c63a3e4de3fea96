"""attest_seed: the data of scripts/bench-attest. Creates one public entity with five levels
through the service (signed by the owner), writes MEMBERS members' progress hashes with the
five levels reached straight into Redis (service/redis/keys.h: ent:{id}:prog:<address>, "r:<lvID>"
-> reachedAt ms; a prog hash makes its address a member to the read), and writes the paths:
  at.txt  GET /api/entities/{id}/members/{address}/attestations?<reader's auth>, one per member
  a.txt   GET /api/entities/{id}?address=<reader> (unsigned)
  b.txt   GET /api/entities/{id}?<reader's auth> (signed)
usage: attest_seed.py BASE_URL REDIS_PORT OWNER_AUTH READER_AUTH MEMBERS OUT_DIR
"""
import json
import os
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpc  # noqa: E402


def resp(*args):
    out = b'*%d\r\n' % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b'$%d\r\n%s\r\n' % (len(a), a)
    return out


def main():
    base, redis_port, owner_auth, reader_auth, members, out = sys.argv[1:7]
    members = int(members)
    u = urllib.parse.urlparse(base)
    c = httpc.Conn(u.hostname, u.port)
    owner = urllib.parse.parse_qs(owner_auth)['address'][0]
    reader = urllib.parse.parse_qs(reader_auth)['address'][0]
    st, _, body = c.request('POST', '/api/entities?' + owner_auth, json.dumps({
        'name': 'Attestation bench guild', 'description': '', 'ownerAddresses': [owner],
        'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'public': True}).encode())
    assert st == 201, (st, body)
    eid = json.loads(body)['data']['id']
    levels = ['apprentice', 'journeyman', 'expert', 'master', 'grandmaster']
    for i, lv in enumerate(levels):
        st, _, body = c.request('POST', '/api/entities/%s/levels/%s/update?%s' % (
            eid, lv, owner_auth), json.dumps({
                'name': 'Level %d: %s' % (i + 1, lv.capitalize()), 'skillIds': [], 'scores': [],
                'XP': 10 * (i + 1)}).encode())
        assert st in (200, 201), (st, body)
    stream = bytearray()
    addrs = []
    for m in range(members):
        addr = '0x%040x' % (0xa77e57 << 100 | m)
        addrs.append(addr)
        args = ['HSET', 'ent:{%s}:prog:%s' % (eid, addr), 'xp', '150']
        for i, lv in enumerate(levels):
            args += ['r:' + lv, str(1700000000000 + 86400000 * i + 1000 * m)]
        stream += resp(*args)
    p = subprocess.run(['redis-cli', '-h', '127.0.0.1', '-p', redis_port, '--pipe'],
                       input=bytes(stream), capture_output=True)
    assert p.returncode == 0 and b'errors: 0' in p.stdout, p.stdout + p.stderr
    with open(os.path.join(out, 'at.txt'), 'w') as f:
        for addr in addrs:
            f.write('/api/entities/%s/members/%s/attestations?%s\n' % (eid, addr, reader_auth))
    with open(os.path.join(out, 'a.txt'), 'w') as f:
        f.write('/api/entities/%s?address=%s\n' % (eid, reader))
    with open(os.path.join(out, 'b.txt'), 'w') as f:
        f.write('/api/entities/%s?%s\n' % (eid, reader_auth))
    print('entity=%s members=%d levels=%d' % (eid, members, len(levels)))


if __name__ == '__main__':
    main()
