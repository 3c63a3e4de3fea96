"""find_seed: fills a private Redis with entities for scripts/bench-find, as the release before
finding stored them: entity hashes, owners, members (hash and order), aliases, and no index key
(so the service's backfill indexes them, CONTRACT §9 "Upgrade").

  find_seed.py --redis-port P --entities N --members M --wallet 0x… --wallet-entities K --out DIR

Every entity has one owner and M members (random addresses); the first K entities also have
--wallet as a member, and the first 1,000 an alias "bench-<i>". Names are "Guild <i, 6 digits>",
so the prefix "guild 01" names 1,000 of them. A RESP stream piped to `redis-cli --pipe`.
Writes DIR/entities.txt (ids, newest first) and DIR/aliases.txt.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import uuid


def resp(*args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(b), b))
    return b''.join(out)


def iso(ms):
    return time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(ms // 1000)) + '.%03dZ' % (ms % 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--redis-port', type=int, required=True)
    ap.add_argument('--redis-cli', default='redis-cli')
    ap.add_argument('--entities', type=int, default=100000)
    ap.add_argument('--members', type=int, default=10)
    ap.add_argument('--wallet', required=True)
    ap.add_argument('--wallet-entities', type=int, default=1000)
    ap.add_argument('--out', required=True)
    a = ap.parse_args()
    owner = '0x' + os.urandom(20).hex()
    base = int(time.time() * 1000) - a.entities * 10
    ids = []
    p = subprocess.Popen([a.redis_cli, '-p', str(a.redis_port), '--pipe'],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    chunk = []
    for i in range(a.entities):
        eid = 'c-' + str(uuid.uuid4())
        ids.append(eid)
        at = base + i * 10
        alias = 'bench-%06d' % i if i < 1000 else ''
        fields = {
            'id': eid, 'name': 'Guild %06d' % i, 'description': 'A guild of the benchmark.',
            'twitter': '@guild', 'discord': 'guild#1', 'website': 'https://example.org',
            'imageURL': 'https://example.org/i.png', 'telegram': '', 'instagram': '',
            'openseaSlug': '', 'defaultDyNftThemeId': '', 'bannerURL': '', 'contracts': '[]',
            'communityURLAlias': alias, 'public': '1', 'isEnabled': '1', '__v': '0',
            'createdAt': iso(at), 'createdBy': owner, 'modifiedAt': iso(at),
            'aliasClaim': '0123456789abcdef' if alias else '',
        }
        ent = {k: fields[k] for k in ('id', 'name', 'description', 'twitter', 'discord',
                                      'website', 'telegram', 'instagram', 'openseaSlug',
                                      'imageURL', 'bannerURL', 'defaultDyNftThemeId',
                                      'communityURLAlias', 'createdAt', 'modifiedAt')}
        ent.update(ownerAddress=[owner], contracts=[], public=True, isEnabled=True, __v=0)
        fields['json'] = json.dumps(ent, separators=(',', ':'))
        key = 'ent:{%s}' % eid
        flat = []
        for k, v in fields.items():
            flat += [k, v]
        chunk.append(resp('HSET', key, *flat))
        chunk.append(resp('SADD', key + ':owners', owner))
        members = ['0x' + os.urandom(20).hex() for _ in range(a.members)]
        if i < a.wallet_entities:
            members[0] = a.wallet.lower()
        hm, zm = [], []
        for m in members:
            entry = '%016d:%s:%s:ETH' % (at, m, owner)
            hm += [m, entry]
            zm += [0, entry]
        if members:
            chunk.append(resp('HSET', key + ':members', *hm))
            chunk.append(resp('ZADD', key + ':members:order', *zm))
        if alias:
            chunk.append(resp('SET', 'alias:{%s}' % alias, '%s %d 0123456789abcdef' %
                              (eid, at // 1000)))
        if len(chunk) > 4000:
            p.stdin.write(b''.join(chunk))
            chunk = []
    p.stdin.write(b''.join(chunk))
    p.stdin.close()
    if p.wait() != 0:
        sys.exit('find_seed: redis-cli --pipe failed')
    with open(os.path.join(a.out, 'entities.txt'), 'w') as f:
        f.write(''.join(e + '\n' for e in reversed(ids)))
    with open(os.path.join(a.out, 'aliases.txt'), 'w') as f:
        f.write(''.join('bench-%06d\n' % i for i in range(min(1000, a.entities))))


if __name__ == '__main__':
    main()
