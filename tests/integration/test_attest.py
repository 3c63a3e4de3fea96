"""Levels reached as EAS off-chain attestations (CONTRACT section 10): every attestation the
service returns verified by the EAS SDK (run with Node), a changed field refused, UIDs stable
across requests and instances, the order, the read rule, 404 when not enabled, the start refused
for an open or malformed key file, a repeated read signing nothing, and signing kept off the
loop (GET entity's p99 beside 64 connections asking cold attestations)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import metric, scaled  # noqa: E402

NODE = shutil.which('node') or '/usr/bin/node'
VERIFY = os.path.join(harness.REPO, 'tests', 'node', 'verify_attest.cjs')
LOAD = os.path.join(harness.REPO, 'tests', 'node', 'attest_load.cjs')
VECTORS = os.path.join(harness.FIXTURES, 'attest_vectors.json')

KEY = '4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318'
KEY_ADDRESS = '0x2c7536E3605D9C16a7a3D7b1898e529396a65c23'
DEV_ADDRESS = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'
EAS_MAINNET = '0xA1207F3BBa224E2c9c3c6D5aF63D0eb1582Ce587'
ZERO32 = '0x' + '00' * 32
TYPES = [['version', 'uint16'], ['schema', 'bytes32'], ['recipient', 'address'],
         ['time', 'uint64'], ['expirationTime', 'uint64'], ['revocable', 'bool'],
         ['refUID', 'bytes32'], ['data', 'bytes'], ['salt', 'bytes32']]


def key_file(text, mode=0o600):
    d = harness.tmpdir('attest-key-')
    path = os.path.join(d, 'key')
    with open(path, 'w') as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def verify(config, attestations, recompute_uid=False):
    """The EAS SDK's verdict on each attestation, and each one's data decoded."""
    req = {'attester': config['attester'],
           'domain': {'address': config['eas'], 'version': config['easVersion'],
                      'chainId': config['chainId']},
           'attestations': attestations, 'recomputeUid': recompute_uid}
    p = subprocess.run([NODE, VERIFY], input=json.dumps(req), capture_output=True, text=True,
                       timeout=scaled(60), cwd=harness.REPO)
    if p.returncode != 0:
        raise AssertionError('verify_attest.cjs failed: %s' % p.stderr[-2000:])
    out = json.loads(p.stdout)
    return out['results'], out['decoded']


class AttestBase(harness.ServiceTestCase):

    @classmethod
    def start(cls, env=None, args=(), instances=1):
        cls.r = cls.class_redis()
        names = ['owner', 'm1', 'm2', 'm3', 'outsider']
        cls.w = dict(zip(names, harness.Wallet.random(len(names))))
        cls.keyfile = key_file('0x%s\n' % KEY)
        e = {'ATTESTATION_KEY_FILE': cls.keyfile}
        e.update(env or {})
        cls.svcs = [cls.class_entityd(redis=cls.r, env=e, args=args) for _ in range(instances)]
        cls.port = cls.svcs[0].port
        msg, _ = harness.current_message(cls.port)
        cls.sig = {n: w.sign(msg)[1] for n, w in cls.w.items()}
        cls.addr = {n: w.address.lower() for n, w in cls.w.items()}

    def call(self, who, method, path, body=None, port=None):
        if who is not None:
            path += ('&' if '?' in path else '?') + 'address=%s&signature=%s' % (
                self.w[who].address, self.sig[who])
        return harness.request(port or self.port, method, path, body=body)

    def entity(self, public=True, name='Guild of Builders', members=('m1', 'm2', 'm3')):
        body = {'name': name, 'description': '', 'ownerAddresses': [self.w['owner'].address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'public': public}
        eid = self.assertOk(self.call('owner', 'POST', '/api/entities', body), 201)['data']['id']
        self.assertOk(self.call('owner', 'POST', '/api/entities/%s/force-add' % eid, {
            'addresses': [self.w[m].address for m in members], 'Chain': 'eth'}))
        return eid

    def level(self, eid, lv, name, xp=10):
        st, _, b = self.call('owner', 'POST', '/api/entities/%s/levels/%s/update' % (eid, lv),
                             {'name': name, 'skillIds': [], 'scores': [], 'XP': xp})
        self.assertIn(st, (200, 201), b)

    def reached(self, eid, member, lv, ms):
        self.r.cli('HSET', 'ent:{%s}:prog:%s' % (eid, self.addr[member]), 'r:' + lv, str(ms))

    def attestations(self, who, eid, member, port=None, status=200):
        return self.call(who, 'GET', '/api/entities/%s/members/%s/attestations' % (
            eid, self.addr[member]), port=port)

    def config(self, port=None):
        return self.assertOk(harness.request(port or self.port, 'GET',
                                             '/api/attestations/config'))['data']


class AttestTest(AttestBase):

    @classmethod
    def setUpClass(cls):
        cls.start(instances=2)

    def five_levels(self, name='Guild of Builders'):
        """An entity with six levels, five reached by m1 (two in the same millisecond)."""
        eid = self.entity(name=name)
        levels = [('lv-b', 'Apprentice', 1700000000123), ('lv-a', 'Größter Meister 🏆 名人',
                                                          1700000000123),
                  ('lv-c', ('Long level name ' * 6).strip(), 1690000000999),
                  ('lv-e', 'Café "quoted" \\ back', 1710000000000),
                  ('lv-d', 'Expert', 1700000005000)]
        for lv, name_, ms in levels:
            self.level(eid, lv, name_)
            self.reached(eid, 'm1', lv, ms)
        self.level(eid, 'lv-z', 'Not reached')
        return eid, levels

    def test_config(self):
        c = self.config()
        with open(VECTORS) as f:
            vec = json.load(f)
        self.assertEqual(c, {
            'attester': KEY_ADDRESS, 'chainId': 1, 'eas': EAS_MAINNET, 'easVersion': '0.26',
            'schemas': {'levelReached': {
                'uid': vec['schema_uid'], 'schema': vec['schema'],
                'resolver': '0x0000000000000000000000000000000000000000', 'revocable': True}}})
        # no signature needed
        self.assertEqual(self.config(self.svcs[1].port), c)

    def test_every_attestation_verifies_in_order(self):
        eid, levels = self.five_levels()
        data = self.assertOk(self.attestations('m1', eid, 'm1'))['data']
        want = sorted(levels, key=lambda l: (l[2], l[0]))
        self.assertEqual([a['levelId'] for a in data], [l[0] for l in want])
        c = self.config()
        sigs = [a['sig'] for a in data]
        ok, decoded = verify(c, sigs)
        self.assertEqual(ok, [True] * len(want))
        for a, (lv, name, ms), dec in zip(data, want, decoded):
            self.assertEqual(a['signer'], KEY_ADDRESS)
            s = a['sig']
            self.assertEqual(s['version'], 2)
            self.assertEqual(s['primaryType'], 'Attest')
            self.assertEqual(s['domain'], {'name': 'EAS Attestation', 'version': '0.26',
                                           'chainId': 1, 'verifyingContract': EAS_MAINNET})
            self.assertEqual([[f['name'], f['type']] for f in s['types']['Attest']], TYPES)
            self.assertEqual(list(s['types']), ['Attest'])
            m = s['message']
            self.assertEqual(m['recipient'].lower(), self.addr['m1'])
            self.assertEqual(m['time'], ms // 1000)
            self.assertEqual(m['expirationTime'], 0)
            self.assertIs(m['revocable'], True)
            self.assertEqual(m['refUID'], ZERO32)
            self.assertEqual(m['schema'], c['schemas']['levelReached']['uid'])
            self.assertEqual(set(s['signature']), {'r', 's', 'v'})
            self.assertIn(s['signature']['v'], (27, 28))
            self.assertEqual({d['name']: d['value'] for d in dec}, {
                'entityId': eid, 'entityName': 'Guild of Builders', 'levelId': lv,
                'levelName': name, 'reachedAt': str(ms // 1000)})

    def test_a_changed_field_fails(self):
        eid, _ = self.five_levels()
        a = self.assertOk(self.attestations('m1', eid, 'm1'))['data'][0]['sig']
        c = self.config()
        other = '0x' + '11' * 20

        def changed(path, value):
            t = json.loads(json.dumps(a))
            node = t
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = value
            return t

        data = a['message']['data']
        cases = [
            changed(['message', 'time'], a['message']['time'] + 1),
            changed(['message', 'recipient'], other),
            changed(['message', 'data'], data[:-2] + ('00' if data[-2:] != '00' else '01')),
            changed(['message', 'salt'], '0x' + '22' * 32),
            changed(['message', 'expirationTime'], 1),
            changed(['message', 'revocable'], False),
            changed(['message', 'refUID'], '0x' + '33' * 32),
            changed(['uid'], '0x' + '44' * 32),
            changed(['signature', 's'], a['signature']['r']),
            changed(['domain', 'chainId'], 10),
            changed(['domain', 'verifyingContract'], other),
        ]
        ok, _ = verify(c, [a] + cases)
        self.assertEqual(ok, [True] + [False] * len(cases))
        # the signature alone catches a changed message, with the UID recomputed to match
        ok, _ = verify(c, [a] + cases[:7], recompute_uid=True)
        self.assertEqual(ok, [True] + [False] * 7)

    def test_uid_stable_across_requests_and_instances(self):
        eid, _ = self.five_levels()
        first = self.assertOk(self.attestations('m1', eid, 'm1'))['data']
        again = self.assertOk(self.attestations('m1', eid, 'm1'))['data']
        other = self.assertOk(self.attestations('m1', eid, 'm1', port=self.svcs[1].port))['data']
        self.assertEqual(first, again)
        self.assertEqual(first, other)  # the whole attestation: same salt, UID and signature
        self.assertEqual(len({a['sig']['uid'] for a in first}), len(first))

    def test_a_renamed_level_is_signed_anew(self):
        eid = self.entity()
        self.level(eid, 'lv-1', 'First name')
        self.reached(eid, 'm2', 'lv-1', 1700000000000)
        before = self.assertOk(self.attestations('m2', eid, 'm2'))['data']
        self.level(eid, 'lv-1', 'Second name')
        after = self.assertOk(self.attestations('m2', eid, 'm2'))['data']
        self.assertNotEqual(before[0]['sig']['uid'], after[0]['sig']['uid'])
        ok, dec = verify(self.config(), [before[0]['sig'], after[0]['sig']])
        self.assertEqual(ok, [True, True])
        self.assertEqual(dec[1][3]['value'], 'Second name')

    def test_a_deleted_level_is_no_longer_attested_nor_inherited(self):
        eid = self.entity()
        self.level(eid, 'lv-1', 'First')
        self.reached(eid, 'm2', 'lv-1', 1700000000000)
        self.assertEqual(len(self.assertOk(self.attestations('m2', eid, 'm2'))['data']), 1)
        self.assertOk(self.call('owner', 'DELETE', '/api/entities/%s/levels/lv-1' % eid))
        self.assertEqual(self.assertOk(self.attestations('m2', eid, 'm2'))['data'], [])
        # A level made again under the same id does not inherit the old reachedAt ...
        self.level(eid, 'lv-1', 'Second')
        self.assertEqual(self.assertOk(self.attestations('m2', eid, 'm2'))['data'], [])
        # ... and is attested from its own (keys.h: "r:<lvID>:<generation>" once recreated).
        self.reached(eid, 'm2', 'lv-1:1', 1710000000000)
        d = self.assertOk(self.attestations('m2', eid, 'm2'))['data']
        self.assertEqual([a['levelId'] for a in d], ['lv-1'])
        ok, dec = verify(self.config(), [d[0]['sig']])
        self.assertEqual(ok, [True])
        self.assertEqual(dec[0][2]['value'], 'lv-1')
        self.assertEqual(dec[0][3]['value'], 'Second')

    def test_read_rule(self):
        eid = self.entity(public=False)
        self.level(eid, 'lv-1', 'One')
        self.reached(eid, 'm1', 'lv-1', 1700000000000)
        st, _, b = self.attestations('outsider', eid, 'm1')
        self.assertEqual(st, 403, b)
        for who in ('m1', 'owner', 'm2'):
            d = self.assertOk(self.attestations(who, eid, 'm1'))['data']
            self.assertEqual([a['levelId'] for a in d], ['lv-1'])
        st, _, _ = self.attestations(None, eid, 'm1')
        self.assertEqual(st, 400)  # no address: the sign-in is required
        # public: anyone signed in
        pub = self.entity(public=True)
        self.assertOk(self.attestations('outsider', pub, 'm1'))

    def test_member_without_levels_and_strangers(self):
        eid = self.entity()
        self.level(eid, 'lv-1', 'One')
        self.assertEqual(self.assertOk(self.attestations('m3', eid, 'm3'))['data'], [])
        st, _, b = self.attestations('owner', eid, 'outsider')
        self.assertEqual(st, 404, b)
        st, _, b = self.call('owner', 'GET', '/api/entities/c-%s/members/%s/attestations' % (
            '0b6a3f58-2f4e-4a3c-9b1d-5c7e8f9a0b1c', self.addr['m1']))
        self.assertEqual(st, 404, b)

    def test_a_repeated_read_signs_nothing(self):
        eid, levels = self.five_levels()
        port = self.svcs[1].port
        before = metric(port, 'entityd_attestations_signed_total', 0.0)
        first = self.assertOk(self.attestations('m1', eid, 'm1', port=port))['data']
        mid = metric(port, 'entityd_attestations_signed_total', 0.0)
        self.assertEqual(mid - before, len(levels))
        for _ in range(3):
            self.assertEqual(self.assertOk(self.attestations('m1', eid, 'm1', port=port))['data'],
                             first)
        self.assertEqual(metric(port, 'entityd_attestations_signed_total', 0.0), mid)
        self.assertGreaterEqual(metric(port, 'entityd_attestation_cache_hits_total', 0.0), 5)
        # another caller reading the same member: the same signed facts, nothing signed
        self.assertOk(self.attestations('owner', eid, 'm1', port=port))
        self.assertEqual(metric(port, 'entityd_attestations_signed_total', 0.0), mid)


class AttestDisabledTest(AttestBase):

    def test_not_enabled_is_404(self):
        r = self.redis()
        svc = self.entityd(redis=r)
        st, _, b = harness.request(svc.port, 'GET', '/api/attestations/config')
        self.assertEqual(st, 404)
        self.assertIn('not enabled', json.dumps(b))
        w = harness.Wallet.random(1)[0]
        msg, _ = harness.current_message(svc.port)
        path = '/api/entities/c-0b6a3f58-2f4e-4a3c-9b1d-5c7e8f9a0b1c/members/%s/attestations' \
            '?address=%s&signature=%s' % (w.address.lower(), w.address, w.sign(msg)[1])
        st, _, b = harness.request(svc.port, 'GET', path)
        self.assertEqual(st, 404)
        self.assertIn('not enabled', json.dumps(b))

    def test_dev_uses_a_public_key_and_says_so(self):
        r = self.redis()
        svc = self.entityd(redis=r, args=['--dev'])
        c = self.config(svc.port)
        self.assertEqual(c['attester'], DEV_ADDRESS)
        self.assertTrue(any('fixed, public key' in json.dumps(l) for l in svc.logs()))


class AttestStartTest(harness.ServiceTestCase):

    def refused(self, path, **env):
        base = harness.Entityd(start=False).env()
        base['ATTESTATION_KEY_FILE'] = path
        base.update(env)
        p = subprocess.run([harness.ENTITYD_BIN], env=base, capture_output=True, text=True,
                           timeout=scaled(10))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn('ATTESTATION_KEY_FILE', p.stderr)
        return p.stderr

    def test_open_key_file_is_refused(self):
        for mode in (0o644, 0o640, 0o604):
            with self.subTest(mode=oct(mode)):
                err = self.refused(key_file(KEY, mode))
                self.assertIn('mode %04o' % mode, err)
                self.assertIn('group or others', err)
                self.assertNotIn(KEY, err)

    def test_malformed_key_is_refused(self):
        for text in ('', '0x1234', KEY[:-1], KEY + '0', KEY[:-1] + 'g', '00' * 32,
                     'fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141'):
            with self.subTest(text=text):
                err = self.refused(key_file(text))
                self.assertNotIn(KEY[8:40], err)
        self.assertIn('cannot be opened', self.refused('/nonexistent/key'))

    def test_bad_eas_address_is_refused(self):
        base = harness.Entityd(start=False).env()
        base.update({'ATTESTATION_KEY_FILE': key_file(KEY), 'ATTESTATION_EAS_ADDRESS': '0x12'})
        p = subprocess.run([harness.ENTITYD_BIN], env=base, capture_output=True, text=True,
                           timeout=scaled(10))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn('ATTESTATION_EAS_ADDRESS', p.stderr)

    def test_key_forms_accepted(self):
        r = self.redis()
        for text in (KEY, '0x' + KEY.upper() + '\n', '\n  ' + KEY + '  \n\n'):
            svc = self.entityd(redis=r, env={'ATTESTATION_KEY_FILE': key_file(text, 0o400)})
            c = self.assertOk(harness.request(svc.port, 'GET', '/api/attestations/config'))
            self.assertEqual(c['data']['attester'], KEY_ADDRESS)
            self.assertNotIn(KEY, svc.stdout() + svc.stderr())


def probe(port, path, seconds):
    """Latencies (s) of sequential GETs of path on one keep-alive connection for `seconds`,
    read raw so that the client adds as little as it can."""
    import socket
    s = socket.create_connection(('127.0.0.1', port), timeout=scaled(10))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = ('GET %s HTTP/1.1\r\nHost: x\r\n\r\n' % path).encode()
    out = []
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            t0 = time.perf_counter()
            s.sendall(req)
            buf = b''
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    raise AssertionError('connection closed')
                buf += chunk
                head, sep, body = buf.partition(b'\r\n\r\n')
                if sep:
                    length = int(head.lower().split(b'content-length:')[1].split(b'\r\n')[0])
                    if len(body) >= length:
                        break
            out.append(time.perf_counter() - t0)
            assert head.startswith(b'HTTP/1.1 200'), head
    finally:
        s.close()
    return out


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


class AttestLoopTest(AttestBase):
    """Signing never blocks the loop: 64 connections asking cold attestations (no cache: each
    read signs 5) leave GET entity on another connection within 2x its p99 without them."""

    @classmethod
    def setUpClass(cls):
        cls.start(env={'ATTESTATION_CACHE_SIZE': '0'})

    def test_signing_never_blocks_the_loop(self):
        eid = self.entity()
        for i in range(5):
            self.level(eid, 'lv-%d' % i, 'Level %d' % i)
        members = ['0x' + os.urandom(20).hex() for _ in range(64)]
        for i, m in enumerate(members):
            self.r.cli('HSET', 'ent:{%s}:prog:%s' % (eid, m), 'xp', '10',
                       *sum([['r:lv-%d' % j, str(1700000000000 + 1000 * (i + j))]
                             for j in range(5)], []))
        auth = 'address=%s&signature=%s' % (self.w['outsider'].address, self.sig['outsider'])
        paths = ['/api/entities/%s/members/%s/attestations?%s' % (eid, m, auth) for m in members]
        d = self.assertOk(harness.request(self.port, 'GET', paths[0]))['data']
        self.assertEqual(len(d), 5)
        pfile = os.path.join(harness.tmpdir('attest-load-'), 'paths.json')
        with open(pfile, 'w') as f:
            json.dump(paths, f)
        entity = '/api/entities/%s?address=%s' % (eid, self.w['outsider'].address)
        probe(self.port, entity, 0.2)  # warm
        # The load's client runs below the loop's priority (nice 10, as the pool's threads), so
        # that the probe measures the loop, not a client taking its core. The probe's windows
        # alternate with the load stopped and running, so that the shared machine's drifts
        # fall on both alike.
        load = subprocess.Popen([NODE, LOAD, str(self.port), pfile, '64',
                                 str(int(scaled(120) * 1000))],
                                stdout=subprocess.PIPE, text=True, cwd=harness.REPO,
                                preexec_fn=lambda: os.nice(10))
        base, loaded, signed = [], [], 0
        try:
            self.assertEqual(load.stdout.readline().strip(), 'started')
            for _ in range(4):
                load.send_signal(signal.SIGSTOP)
                time.sleep(0.2)  # the requests in flight answered
                base += probe(self.port, entity, 0.6)
                load.send_signal(signal.SIGCONT)
                time.sleep(0.2)  # every connection asking again
                before = metric(self.port, 'entityd_attestations_signed_total', 0.0)
                loaded += probe(self.port, entity, 0.6)
                signed += metric(self.port, 'entityd_attestations_signed_total', 0.0) - before
        finally:
            load.kill()
            load.wait(scaled(10))
        # the load was signing all along the probe's loaded windows
        self.assertGreater(signed, 5 * 64)
        b, l = p99(base), p99(loaded)
        sys.stderr.write('GET entity p99: %.3f ms alone, %.3f ms beside cold attestations '
                         '(%d signed meanwhile)\n' % (b * 1e3, l * 1e3, signed))
        # Signing on the loop would hold each probe behind up to 64 x 5 signatures (about
        # 15 ms). The bound is half that, or 2x the probe alone if more: with both cores kept
        # busy (scripts/test --loaded) a probe beside the load's own client and the pool's
        # threads was seen at 3.0 ms p99, over the 2 ms this once allowed.
        self.assertLessEqual(l, max(2 * b, scaled(0.0075)))


if __name__ == '__main__':
    harness.main()
