"""Sign-In with Ethereum (CONTRACT section 11): the EIP-4361 message for an address, parsed by
the siwe library, signed by ethers and by entityd-sign --siwe; accepted for that address only,
for the same two epochs, revoked like any signature; section 2's message unchanged."""

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import nodetools  # noqa: E402
from harness import auth_query, metric, probe_path  # noqa: E402

SECRET = 'siwe-test-secret-0123456789abcdef'
DOMAIN = 'siwe.test.example'
URI = 'https://app.siwe.test.example/login'
CHAIN_ID = 10
EPOCH_SECONDS = 3600
ENV = {'AUTH_DOMAIN': DOMAIN, 'AUTH_EPOCH_SECONDS': EPOCH_SECONDS, 'AUTH_URI': URI,
       'AUTH_CHAIN_ID': CHAIN_ID}


def siwe_message(address, epoch, domain=DOMAIN, uri=URI, chain_id=CHAIN_ID,
                 epoch_seconds=EPOCH_SECONDS, secret=SECRET):
    """CONTRACT section 11's message, computed independently of the service."""
    return '\n'.join([
        '%s wants you to sign in with your Ethereum account:' % domain,
        harness.eip55(address),
        '',
        'Sign in to %s. It costs no gas.' % domain,
        '',
        'URI: %s' % uri,
        'Version: 1',
        'Chain ID: %d' % chain_id,
        'Nonce: %s' % harness.signin_nonce(secret, epoch),
        'Issued At: %s' % harness.iso_ms(epoch * epoch_seconds * 1000),
        'Expiration Time: %s' % harness.iso_ms((epoch + 2) * epoch_seconds * 1000),
    ])


@harness.unittest.skipUnless(nodetools.available(), 'tests/node tools are not installed')
class SiweTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.a = cls.class_entityd(redis=cls.r, env=ENV, secret=SECRET)
        cls.b = cls.class_entityd(redis=cls.r, env=ENV, secret=SECRET)
        cls.wallets = harness.Wallet.random(8)

    def message_of(self, address, svc=None):
        st, _, body = (svc or self.a).request('GET', '/api/auth/message?address=' + address)
        self.assertEqual(st, 200, body)
        return body['data']

    def test_message_is_the_contract_text_and_parses_with_siwe(self):
        w = self.wallets[0]
        for spelled in (w.address, w.address.upper().replace('0X', '0x'), harness.eip55(w.address)):
            d = self.message_of(spelled)
            self.assertEqual(d['message'], siwe_message(w.address, d['epoch']))
            self.assertEqual(d['issuedAt'], harness.iso_ms(d['epoch'] * EPOCH_SECONDS * 1000))
            self.assertEqual(d['expiresAt'],
                             harness.iso_ms((d['epoch'] + 2) * EPOCH_SECONDS * 1000))
            self.assertEqual(d['renewAfter'],
                             harness.iso_ms((d['epoch'] + 1) * EPOCH_SECONDS * 1000))
        out = nodetools.siwe_tool(d['message'])
        self.assertNotIn('error', out, out)
        p = out['parsed']
        self.assertEqual(p['domain'], DOMAIN)
        self.assertEqual(p['address'], harness.eip55(w.address))
        self.assertEqual(p['uri'], URI)
        self.assertEqual(p['version'], '1')
        self.assertEqual(p['chainId'], CHAIN_ID)
        self.assertEqual(p['nonce'], harness.signin_nonce(SECRET, d['epoch']))
        self.assertEqual(p['statement'], 'Sign in to %s. It costs no gas.' % DOMAIN)
        self.assertEqual(p['issuedAt'], d['issuedAt'])
        self.assertEqual(p['expirationTime'], d['expiresAt'])
        self.assertEqual(out['prepared'], d['message'], 'the library renders the same text')

    def test_defaults_uri_and_chain(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'AUTH_DOMAIN': DOMAIN}, secret=SECRET)
        w = self.wallets[1]
        st, _, body = svc.request('GET', '/api/auth/message?address=' + w.address)
        self.assertEqual(st, 200, body)
        d = body['data']
        self.assertEqual(d['message'], siwe_message(w.address, d['epoch'], uri='https://' + DOMAIN,
                                                    chain_id=1, epoch_seconds=86400))
        out = nodetools.siwe_tool(d['message'])
        self.assertNotIn('error', out, out)
        self.assertEqual(out['parsed']['chainId'], 1)

    def test_without_address_section_2_message_unchanged(self):
        msg, epoch = harness.current_message(self.a.port)
        self.assertEqual(msg, harness.signin_message(SECRET, DOMAIN, EPOCH_SECONDS, epoch))
        w = self.wallets[2]
        a, s = w.sign(msg)
        st, _, body = self.a.request('GET', probe_path(a, s))
        self.assertEqual(st, 404, body)

    def test_bad_address_is_invalid_request(self):
        for bad in ('0xBAD', '0x' + 'g' * 40, '0xAbCdEf0123456789aBcDeF0123456789AbCdEf01'):
            st, _, body = self.a.request('GET', '/api/auth/message?address=' + bad)
            self.assertEqual(st, 400, body)
            self.assertEqual(body['error']['field'], 'address', body)

    def test_ethers_signature_signs_in_on_every_instance(self):
        w = self.wallets[3]
        before = metric(self.a, 'entityd_auth_siwe_signins_total')
        d = self.message_of(w.address)
        sig = nodetools.siwe_tool(d['message'], key=w.key)['signature']
        for svc in (self.a, self.b):
            st, _, body = svc.request('GET', probe_path(w.address, sig))
            self.assertEqual(st, 404, body)
            # Checksummed address spelling too.
            st, _, body = svc.request('GET', probe_path(harness.eip55(w.address), sig))
            self.assertEqual(st, 404, body)
        self.assertEqual(metric(self.a, 'entityd_auth_siwe_signins_total'), before + 1,
                         'one new SIWE signature verified; the repeat came from the cache')

    def test_entityd_sign_siwe(self):
        w = self.wallets[4]
        out = harness._run_sign(['--url', 'http://127.0.0.1:%d' % self.a.port, '--siwe'],
                                key=w.key)
        a, s = harness._parse_sign_line(out)
        self.assertEqual(a, w.address)
        d = self.message_of(w.address)
        expected = nodetools.siwe_tool(d['message'], key=w.key)['signature']
        self.assertEqual(s.lower(), expected.lower(), 'entityd-sign signed the SIWE message')
        st, _, body = self.a.request('GET', probe_path(a, s))
        self.assertEqual(st, 404, body)

    def test_refused_for_another_address(self):
        w, other = self.wallets[5], self.wallets[6]
        d = self.message_of(w.address)
        sig = nodetools.siwe_tool(d['message'], key=w.key)['signature']
        st, _, body = self.a.request('GET', probe_path(other.address, sig))
        self.assertEqual(st, 401, body)
        self.assertEqual(body['error']['code'], 'unauthenticated')
        # The message of another address, signed by w: neither address signs in with it.
        d2 = self.message_of(other.address)
        sig2 = nodetools.siwe_tool(d2['message'], key=w.key)['signature']
        for addr in (w.address, other.address):
            st, _, body = self.a.request('GET', probe_path(addr, sig2))
            self.assertEqual(st, 401, body)
        # And the signed-in one still works after the refusals.
        st, _, body = self.a.request('GET', probe_path(w.address, sig))
        self.assertEqual(st, 404, body)

    def test_revoked_like_any_signature(self):
        w = self.wallets[7]
        d = self.message_of(w.address)
        sig = nodetools.siwe_tool(d['message'], key=w.key)['signature']
        st, _, body = self.b.request('GET', probe_path(w.address, sig))
        self.assertEqual(st, 404, body)  # verified and cached on b
        st, _, body = self.a.request('POST', '/api/auth/revoke?' + auth_query(w.address, sig))
        self.assertEqual(st, 200, body)
        for svc in (self.a, self.b):
            st, _, body = svc.request('GET', probe_path(w.address, sig))
            self.assertEqual(st, 401, body)
            self.assertIn('revoked', body['error']['message'])
        # The same (r, s) spelled compact is revoked too.
        st, _, body = self.a.request('GET', probe_path(w.address, harness.to_compact(sig)))
        self.assertEqual(st, 401, body)


@harness.unittest.skipUnless(nodetools.available(), 'tests/node tools are not installed')
class SiweEpochTest(harness.ServiceTestCase):
    """AUTH_EPOCH_SECONDS=2: a SIWE signature of epoch e holds in e and e+1, then expires."""

    E = 2

    def test_next_epoch_then_expired(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'AUTH_EPOCH_SECONDS': self.E}, secret=SECRET)
        w = harness.Wallet.random(1)[0]

        def epoch_now():
            return math.floor(time.time() / self.E)

        def wait_epoch(target):
            harness.wait_for(lambda: epoch_now() >= target, (target - epoch_now() + 2) * self.E,
                             interval=0.01, what='epoch %d' % target)

        for attempt in range(4):
            wait_epoch(epoch_now() + 1)
            st, _, body = svc.request('GET', '/api/auth/message?address=' + w.address)
            self.assertEqual(st, 200, body)
            e = body['data']['epoch']
            msg = body['data']['message']
            _, sig = w.sign(msg)
            if epoch_now() != e:
                continue
            wait_epoch(e + 1)
            st, _, body = svc.request('GET', probe_path(w.address, sig))
            if epoch_now() != e + 1:
                continue
            self.assertEqual(st, 404, body)
            wait_epoch(e + 2)
            # A new spelling (v 0/1), so that the cache cannot answer for it.
            st, _, body = svc.request('GET', probe_path(w.address, harness.to_v01(sig)))
            self.assertEqual(st, 401, body)
            return
        self.fail('could not line the test up with the epochs')


if __name__ == '__main__':
    harness.main()
