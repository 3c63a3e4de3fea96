"""cluster_seed: N entities made through the API of one entityd (any Redis mode), so that the
same seeding serves a single Redis and a cluster alike. Prints one entity id per line.

  cluster_seed.py --base http://127.0.0.1:PORT --sign ENTITYD_SIGN_BIN --entities N

The owner signs with the key in ENTITYD_SIGN_KEY (entityd-sign's default). Exits 1 when a
create is refused."""
import argparse
import http.client
import json
import subprocess
import sys
import urllib.parse


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--base', required=True)
    p.add_argument('--sign', required=True)
    p.add_argument('--entities', type=int, required=True)
    a = p.parse_args()
    auth = subprocess.run([a.sign, '--url', a.base], capture_output=True, check=True,
                          text=True).stdout.strip()
    owner = urllib.parse.parse_qs(auth)['address'][0]
    u = urllib.parse.urlsplit(a.base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    for i in range(a.entities):
        body = json.dumps({'name': 'Bench %d' % i, 'description': 'A benchmark entity.',
                           'ownerAddresses': [owner], 'twitter': '@b', 'discord': 'b#1',
                           'website': 'https://example.org',
                           'imageUrl': 'https://example.org/i.png'})
        conn.request('POST', '/api/entities?' + auth, body,
                     {'Content-Type': 'application/json'})
        r = conn.getresponse()
        data = r.read()
        if r.status != 201:
            sys.stderr.write('cluster_seed: create answered %d: %r\n' % (r.status, data[:200]))
            sys.exit(1)
        print(json.loads(data)['data']['id'])


if __name__ == '__main__':
    main()
