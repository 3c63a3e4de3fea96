"""Sessions (CONTRACT section 13): challenges, sessions made from a challenge, from the epoch's
message and from a contract wallet, their bound per address, the cookie, and their ends (this
token, one by id, all of an address, the revocation of their signature); records checked in
Redis, and no token in any answer but its creation's or in any log."""

import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import nodetools  # noqa: E402
from harness import auth_query, revoke_path  # noqa: E402
from support.wallets import keccak256  # noqa: E402

DOMAIN = 'sessions.test.example'
URI = 'https://app.sessions.test.example/login'
CHAIN_ID = 5
ENV = {'AUTH_DOMAIN': DOMAIN, 'AUTH_URI': URI, 'AUTH_CHAIN_ID': CHAIN_ID,
       'SESSIONS_PER_ADDRESS': 50}
TOKENS = set()  # every token answered, for the log check


def parse_iso(s):
    return datetime.datetime.strptime(s, '%Y-%m-%dT%H:%M:%S.%fZ').replace(
        tzinfo=datetime.timezone.utc).timestamp()


def token_id(token):
    return keccak256(token.encode()).hex()[:24]


def cookie_attrs(header):
    parts = [p.strip() for p in header.split(';')]
    name, _, value = parts[0].partition('=')
    attrs = {}
    for p in parts[1:]:
        k, _, v = p.partition('=')
        attrs[k] = v
    return name, value, attrs


class SessionsBase(harness.ServiceTestCase):

    def challenge(self, address, svc=None):
        st, _, b = (svc or self.a).request('POST', '/api/auth/challenge', {'address': address})
        self.assertEqual(st, 200, b)
        return b['data']

    def session(self, body, svc=None, headers=None, status=201):
        st, h, b = (svc or self.a).request('POST', '/api/auth/session', body, headers=headers)
        self.assertEqual(st, status, b)
        if st == 201:
            TOKENS.add(b['data']['token'])
        return h, b

    def records(self, address):
        flat = self.r.cli('HGETALL', 'auth:sess:{%s}' % address)
        h = {flat[i].decode() if isinstance(flat[i], bytes) else flat[i]:
             flat[i + 1].decode() if isinstance(flat[i + 1], bytes) else flat[i + 1]
             for i in range(0, len(flat or []), 2)}
        return {k: v for k, v in h.items() if ':' not in k}, h


@harness.unittest.skipUnless(nodetools.available(), 'tests/node tools are not installed')
class SessionsTest(SessionsBase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.a = cls.class_entityd(redis=cls.r, env=ENV)
        cls.dev = cls.class_entityd(redis=cls.r, env=dict(ENV, SESSION_COOKIE_SAMESITE='Strict'),
                                    args=('--dev',))
        cls.wallets = harness.Wallet.random(10)

    @classmethod
    def tearDownClass(cls):
        # Nothing any instance wrote holds a token.
        logs = ''.join(s.stdout() + s.stderr() for s in (cls.a, cls.dev))
        super().tearDownClass()
        leaked = [t for t in TOKENS if t in logs or t[3:] in logs]
        if leaked:
            raise AssertionError('%d session tokens in the logs' % len(leaked))

    def epoch_session(self, w, svc=None, headers=None):
        msg, _ = harness.current_message((svc or self.a).port)
        address, sig = w.sign(msg)
        h, b = self.session({'address': address, 'signature': sig}, svc=svc, headers=headers)
        return sig, h, b['data']

    def test_challenge_shape_and_expiry(self):
        w = self.wallets[0]
        before = time.time()
        d = self.challenge(harness.eip55(w.address))
        self.assertEqual(set(d), {'message', 'nonce', 'expiresAt'})
        self.assertRegex(d['nonce'], r'^[A-Za-z0-9]{8,32}$')
        parsed = nodetools.siwe_tool(d['message'])['parsed']
        self.assertEqual(parsed['address'], harness.eip55(w.address))
        self.assertEqual(parsed['domain'], DOMAIN)
        self.assertEqual(parsed['uri'], URI)
        self.assertEqual(int(parsed['chainId']), CHAIN_ID)
        self.assertEqual(parsed['nonce'], d['nonce'])
        issued, expires = parse_iso(parsed['issuedAt']), parse_iso(parsed['expirationTime'])
        self.assertAlmostEqual(expires - issued, 600, delta=0.01)
        self.assertEqual(parse_iso(d['expiresAt']), expires)
        self.assertLessEqual(before - 1, issued)
        self.assertLessEqual(issued, time.time() + 1)
        key = 'auth:chal:{%s}:%s' % (w.address, d['nonce'])
        self.assertEqual(int(self.r.cli('GET', key)), round(issued * 1000))
        self.assertTrue(590000 < int(self.r.cli('PTTL', key)) <= 600000)
        # Fresh each time.
        self.assertNotEqual(self.challenge(w.address)['nonce'], d['nonce'])
        st, _, b = self.a.request('POST', '/api/auth/challenge', {'address': '0x1234'})
        self.assertEqual((st, b['error']['field']), (400, 'address'), b)

    def test_session_from_challenge_once(self):
        w = self.wallets[1]
        d = self.challenge(w.address)
        sig = nodetools.siwe_tool(d['message'], key=w.key)['signature']
        before = time.time()
        h, b = self.session({'address': w.address, 'signature': sig, 'nonce': d['nonce']},
                            headers={'User-Agent': 'sessions-test'})
        data = b['data']
        self.assertEqual(set(data), {'token', 'address', 'expiresAt'})
        self.assertRegex(data['token'], r'^es_%s[0-9a-f]{32}$' % w.address[2:])
        self.assertEqual(data['address'], w.address)
        self.assertAlmostEqual(parse_iso(data['expiresAt']), before + 604800, delta=5)
        recs, _ = self.records(w.address)
        rec = recs[token_id(data['token'])].split(':')
        self.assertEqual(rec[2:], ['c', keccak256(data['token'].encode()).hex(), '-'])
        self.assertEqual(int(rec[0]), round(parse_iso(data['expiresAt']) * 1000))
        self.assertEqual(self.r.cli('EXISTS', 'auth:chal:{%s}:%s' % (w.address, d['nonce'])), 0)
        # A consumed challenge is refused the second time.
        _, b2 = self.session({'address': w.address, 'signature': sig, 'nonce': d['nonce']},
                             status=401)
        self.assertNotIn(data['token'], str(b2))
        self.assertEqual(len(self.records(w.address)[0]), 1)

    def test_challenge_of_another_address_and_wrong_signature_refused(self):
        w, other = self.wallets[2], self.wallets[3]
        d = self.challenge(w.address)
        # The other wallet signs w's message, presenting itself: no challenge of its own.
        _, sig_other = other.sign(d['message'])
        self.session({'address': other.address, 'signature': sig_other, 'nonce': d['nonce']},
                     status=401)
        # That signature for w: not w's.
        self.session({'address': w.address, 'signature': sig_other, 'nonce': d['nonce']},
                     status=401)
        # A signature of another text by w.
        _, wrong = w.sign(d['message'] + ' ')
        self.session({'address': w.address, 'signature': wrong, 'nonce': d['nonce']},
                     status=401)
        self.session({'address': w.address, 'signature': '0x1234', 'nonce': d['nonce']},
                     status=401)
        self.assertEqual(self.records(w.address)[0], {})
        # The challenge was not spent by the refusals: w's own signature still makes a session.
        _, sig = w.sign(d['message'])
        self.session({'address': w.address, 'signature': sig, 'nonce': d['nonce']})
        st, _, b = self.a.request('POST', '/api/auth/session',
                                  {'address': w.address, 'signature': sig, 'nonce': 'a-b'})
        self.assertEqual((st, b['error']['field']), (400, 'nonce'), b)

    def test_epoch_session_ends_with_its_signature_revoked(self):
        w = self.wallets[4]
        msg, epoch = harness.current_message(self.a.port)
        _, sig = w.sign(msg)
        _, b = self.session({'address': w.address, 'signature': sig})
        data = b['data']
        st, _, m = self.a.request('GET', '/api/auth/message')
        # The signature's expiry: the end of the epoch after its own.
        self.assertEqual(parse_iso(data['expiresAt']),
                         parse_iso(m['data']['expiresAt']))
        recs, _ = self.records(w.address)
        rec = recs[token_id(data['token'])].split(':')
        r_s = sig[2:130].lower()
        self.assertEqual(rec[2], 'e')
        self.assertEqual(rec[4], r_s)
        # Another session of w, from a challenge, survives the revocation.
        d = self.challenge(w.address)
        _, csig = w.sign(d['message'])
        _, b2 = self.session({'address': w.address, 'signature': csig, 'nonce': d['nonce']})
        st, _, b3 = self.a.request('POST', revoke_path(w.address, sig))
        self.assertEqual(st, 200, b3)
        recs, full = self.records(w.address)
        self.assertEqual(set(recs), {token_id(b2['data']['token'])})
        self.assertNotIn('u:' + token_id(data['token']), full)

    def test_the_51st_session_ends_the_oldest(self):
        w = self.wallets[5]
        msg, _ = harness.current_message(self.a.port)
        _, sig = w.sign(msg)
        ids = []
        for _ in range(51):
            _, b = self.session({'address': w.address, 'signature': sig})
            ids.append(token_id(b['data']['token']))
        recs, full = self.records(w.address)
        self.assertEqual(len(recs), 50)
        self.assertEqual(set(recs), set(ids[1:]))
        self.assertEqual(len(full), 100)  # each record and its lastUsedAt, no leftovers
        pttl = int(self.r.cli('PTTL', 'auth:sess:{%s}' % w.address))
        self.assertGreater(pttl, 0)

    def test_list_delete_and_revoke_all(self):
        w, other = self.wallets[6], self.wallets[7]
        ua = 'Mozilla/5.0 ' + 'x' * 300
        msg, _ = harness.current_message(self.a.port)
        _, sig = w.sign(msg)
        made = [self.session({'address': w.address, 'signature': sig},
                             headers={'User-Agent': ua})[1]['data'] for _ in range(3)]
        _, osig = other.sign(msg)
        other_tok = self.session({'address': other.address, 'signature': osig})[1]['data']
        q = auth_query(w.address, sig)
        st, _, b = self.a.request('GET', '/api/auth/sessions?' + q)
        self.assertEqual(st, 200, b)
        self.assertEqual(len(b['data']), 3)
        self.assertEqual({s['id'] for s in b['data']}, {token_id(m['token']) for m in made})
        for s in b['data']:
            self.assertEqual(set(s), {'id', 'createdAt', 'expiresAt', 'lastUsedAt', 'userAgent'})
            self.assertEqual(s['userAgent'], ua[:200])
            self.assertEqual(parse_iso(s['lastUsedAt']) % 60, 0)
            self.assertLessEqual(parse_iso(s['createdAt']) - parse_iso(s['lastUsedAt']), 60)
        text = str(b)
        for m in made:
            self.assertNotIn(m['token'], text)
            self.assertNotIn(keccak256(m['token'].encode()).hex(), text)
        # One by id; another's id is not the caller's.
        first = token_id(made[0]['token'])
        st, _, b = self.a.request('DELETE', '/api/auth/sessions/%s?%s' % (first, q))
        self.assertEqual(st, 200, b)
        st, _, b = self.a.request('DELETE', '/api/auth/sessions/%s?%s' % (first, q))
        self.assertEqual(st, 404, b)
        st, _, b = self.a.request('DELETE', '/api/auth/sessions/%s?%s' %
                                  (token_id(other_tok['token']), q))
        self.assertEqual(st, 404, b)
        self.assertIn(token_id(other_tok['token']), self.records(other.address)[0])
        recs, full = self.records(w.address)
        self.assertNotIn(first, recs)
        self.assertFalse([k for k in full if k.endswith(first)])
        # This token, by Bearer: ended, and the cookie cleared.
        st, h, b = self.a.request('DELETE', '/api/auth/session',
                                  headers={'Authorization': 'Bearer ' + made[1]['token']})
        self.assertEqual(st, 200, b)
        self.assertNotIn(token_id(made[1]['token']), self.records(w.address)[0])
        st, _, b = self.a.request('DELETE', '/api/auth/session',
                                  headers={'Authorization': 'Bearer ' + made[1]['token']})
        self.assertEqual(st, 401, b)
        st, _, b = self.a.request('DELETE', '/api/auth/session')
        self.assertEqual(st, 401, b)
        # All of w's: the hash is gone, the other address's sessions stay.
        st, _, b = self.a.request('POST', '/api/auth/sessions/revoke-all?' + q)
        self.assertEqual(st, 200, b)
        self.assertEqual(self.r.cli('EXISTS', 'auth:sess:{%s}' % w.address), 0)
        self.assertEqual(len(self.records(other.address)[0]), 1)
        st, _, b = self.a.request('GET', '/api/auth/sessions?' + q)
        self.assertEqual((st, b['data']), (200, []))
        # By cookie, from the service's own origin (AUTH_URI's), as a browser sends it: ended
        # and cleared.
        st, h, b = self.a.request('DELETE', '/api/auth/session',
                                  headers={'Cookie': 'entityd_session=' + other_tok['token'],
                                           'Origin': 'https://app.sessions.test.example'})
        self.assertEqual(st, 200, b)
        name, value, attrs = cookie_attrs(h['set-cookie'])
        self.assertEqual((name, value, attrs['Max-Age']), ('entityd_session', '', '0'))
        self.assertEqual(self.r.cli('EXISTS', 'auth:sess:{%s}' % other.address), 0)
        # Unsigned, these are refused.
        st, _, b = self.a.request('GET', '/api/auth/sessions?address=' + w.address)
        self.assertEqual(st, 401, b)

    def test_set_cookie_attributes(self):
        w = self.wallets[8]
        _, h, d = self.epoch_session(w)
        name, value, attrs = cookie_attrs(h['set-cookie'])
        self.assertEqual((name, value), ('entityd_session', d['token']))
        self.assertEqual(attrs.get('Path'), '/api')
        self.assertEqual(attrs.get('SameSite'), 'Lax')
        self.assertIn('HttpOnly', attrs)
        self.assertIn('Secure', attrs)
        left = parse_iso(d['expiresAt']) - time.time()
        self.assertAlmostEqual(int(attrs['Max-Age']), left, delta=5)
        # --dev leaves Secure out; SESSION_COOKIE_SAMESITE chooses SameSite.
        _, h, d = self.epoch_session(self.wallets[9], svc=self.dev)
        name, value, attrs = cookie_attrs(h['set-cookie'])
        self.assertEqual((name, value), ('entityd_session', d['token']))
        self.assertNotIn('Secure', attrs)
        self.assertEqual(attrs.get('SameSite'), 'Strict')
        self.assertIn('HttpOnly', attrs)


@harness.unittest.skipUnless(nodetools.available(), 'tests/node tools are not installed')
class ContractSessionsTest(SessionsBase):
    """A Safe (ganache, tests/node/safe_chain.js) makes sessions that live at most
    SESSION_CONTRACT_TTL_SECONDS."""

    TTL = 120

    @classmethod
    def setUpClass(cls):
        cls.chain = nodetools.SafeChain()
        try:
            cls.r = cls.class_redis()
            cls.a = cls.class_entityd(redis=cls.r, env=dict(
                ENV, ETH_RPC_URL=cls.chain.rpc, SESSION_CONTRACT_TTL_SECONDS=cls.TTL))
            cls.safe = cls.chain.safe('oneOfOne')
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, 'chain', None) is not None:
            cls.chain.stop()
        super().tearDownClass()

    def test_safe_session_from_a_challenge_ends_sooner(self):
        d = self.challenge(self.safe)
        sig = self.chain.sign(self.safe, nodetools.personal_hash(d['message']), [0])
        before = time.time()
        _, b = self.session({'address': self.safe, 'signature': sig, 'nonce': d['nonce']})
        self.assertAlmostEqual(parse_iso(b['data']['expiresAt']), before + self.TTL, delta=5)
        rec = self.records(self.safe)[0][token_id(b['data']['token'])].split(':')
        self.assertEqual(rec[2], 'w')
        # Another Safe's owners' signature is not this one's.
        d = self.challenge(self.safe)
        wrong = self.chain.sign(self.safe, '0x' + '42' * 32, [0])
        self.session({'address': self.safe, 'signature': wrong, 'nonce': d['nonce']},
                     status=401)

    def test_safe_session_from_the_epoch_message(self):
        msg, _ = harness.current_message(self.a.port)
        sig = self.chain.sign(self.safe, nodetools.personal_hash(msg), [0])
        before = time.time()
        _, b = self.session({'address': self.safe, 'signature': sig})
        self.assertAlmostEqual(parse_iso(b['data']['expiresAt']), before + self.TTL, delta=5)
        rec = self.records(self.safe)[0][token_id(b['data']['token'])].split(':', 4)
        self.assertEqual(rec[2], 'w')
        self.assertTrue(rec[4].startswith(self.safe + ':'), rec)


if __name__ == '__main__':
    harness.main()
