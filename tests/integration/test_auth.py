"""Wallet sign-in: the message, signature forms, address checks, expiry, revocation across
instances, and signatures kept out of the logs."""

import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import auth_query, fresh_wallet, probe_path, revoke_path, scaled  # noqa: E402

SECRET = 'auth-test-secret-\u00e9-' + 'k' * 20   # non-ASCII: the HMAC key is its UTF-8 bytes
DOMAIN = 'auth.test.example'
EPOCH_SECONDS = 3600
ENV = {'AUTH_DOMAIN': DOMAIN, 'AUTH_EPOCH_SECONDS': EPOCH_SECONDS, 'LOG_LEVEL': 'debug'}

class AuthTest(harness.ServiceTestCase):
    """Two instances (A, B) with the same secret sharing one Redis."""

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.a = cls.class_entityd(redis=cls.r, env=ENV, secret=SECRET)
        cls.b = cls.class_entityd(redis=cls.r, env=ENV, secret=SECRET)

    def message(self, svc=None):
        return harness.current_message((svc or self.a).port)

    def expected_message(self, epoch):
        return harness.signin_message(SECRET, DOMAIN, EPOCH_SECONDS, epoch)

    def signed(self, svc=None, **kw):
        msg, _ = self.message(svc)
        return fresh_wallet().sign(msg, **kw)

    def revoke(self, creds, svc=None):
        return (svc or self.a).request('POST', revoke_path(*creds))

    def assertUnauthenticated(self, resp, contains=None):
        return self.assertEnvelope(resp, 401, 'unauthenticated', message_contains=contains)

    # --- the message ---

    def test_message_matches_independent_computation(self):
        before = time.time()
        st, h, body = self.a.request('GET', '/api/auth/message')
        after = time.time()
        self.assertEqual(st, 200)
        self.assertEqual(h['content-type'], 'application/json; charset=utf-8')
        self.assertIs(body['success'], True)
        data = body['data']
        self.assertEqual(set(data), {'message', 'epoch', 'issuedAt', 'expiresAt', 'renewAfter'})
        epoch = data['epoch']
        self.assertIs(type(epoch), int)
        self.assertIn(epoch, {math.floor(before / EPOCH_SECONDS),
                              math.floor(after / EPOCH_SECONDS)})
        expected = self.expected_message(epoch)
        self.assertEqual(data['message'].encode('utf-8'), expected.encode('utf-8'))
        self.assertFalse(data['message'].endswith('\n'))
        self.assertEqual(data['issuedAt'], harness.iso_ms(epoch * EPOCH_SECONDS * 1000))
        self.assertEqual(data['renewAfter'], harness.iso_ms((epoch + 1) * EPOCH_SECONDS * 1000))
        self.assertEqual(data['expiresAt'], harness.iso_ms((epoch + 2) * EPOCH_SECONDS * 1000))
        self.assertIn('Issued At: %s\n' % data['issuedAt'], data['message'])
        self.assertTrue(data['message'].endswith('Expiration Time: %s' % data['expiresAt']))
        for k in ('issuedAt', 'expiresAt', 'renewAfter'):
            self.assertRegex(data[k], r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$')
        # The other instance derives the very same message with no shared state.
        msg_b, epoch_b = self.message(self.b)
        if epoch_b == epoch:
            self.assertEqual(msg_b, data['message'])

    def test_message_defaults(self):
        # Default domain and epoch length (one day), the secret from AUTH_SECRET.
        svc = self.entityd(redis=self.r)
        before = time.time()
        msg, epoch = self.message(svc)
        after = time.time()
        self.assertIn(epoch, {int(before // 86400), int(after // 86400)})
        self.assertEqual(msg, harness.signin_message(harness.TEST_SECRET, 'entityd.local', 86400,
                                                     epoch))
        self.assertTrue(msg.startswith('Sign in to entityd.local\n\n'))

    def test_sign_tool_url_signs_the_same_message(self):
        w = fresh_wallet()
        msg, epoch = self.message()
        _, via_url = w.sign_url(self.a.port)
        if self.message()[1] != epoch:
            self.skipTest('epoch changed mid-test')
        _, direct = w.sign(self.expected_message(epoch))
        self.assertEqual(via_url, direct)  # RFC 6979: deterministic
        self.assertOk(self.revoke((w.address, via_url)))

    # --- accepted signatures ---

    def test_signed_request_accepted_once(self):
        w = fresh_wallet()
        msg, epoch = self.message()
        self.assertEqual(msg, self.expected_message(epoch))
        creds = w.sign(self.expected_message(epoch))
        st, h, body = self.revoke(creds)
        self.assertEqual((st, body), (200, {'success': True}))
        rid = h['x-request-id']
        # The request log names the caller (lowercase), not the signature.
        harness.wait_for(lambda: [r for r in self.a.logs() if r.get('request_id') == rid],
                         scaled(3), what='the request log line')
        rec = [r for r in self.a.logs() if r.get('request_id') == rid][0]
        self.assertEqual(rec['caller'], w.address)
        self.assertEqual(rec['route'], '/api/auth/revoke')
        self.assertEqual(rec['status'], 200)
        # Revoking consumed it.
        self.assertUnauthenticated(self.revoke(creds), 'revoked')

    def test_compact_and_v01_forms_accepted(self):
        msg, _ = self.message()
        for kw in ({'compact': True}, {'v01': True}):
            creds = fresh_wallet().sign(msg, **kw)
            if kw.get('compact'):
                self.assertEqual(len(creds[1]), 2 + 128)
            else:
                self.assertIn(creds[1][-2:], ('00', '01'))
            self.assertOk(self.revoke(creds))
        # The same forms computed here from a 65-byte signature.
        for conv in (harness.to_compact, harness.to_v01):
            a, s = fresh_wallet().sign(msg)
            self.assertOk(self.revoke((a, conv(s))))
        # The sign tool and this conversion agree.
        w = fresh_wallet()
        self.assertEqual(w.sign(msg, compact=True)[1], harness.to_compact(w.sign(msg)[1]))
        self.assertEqual(w.sign(msg, v01=True)[1], harness.to_v01(w.sign(msg)[1]))

    def test_address_spellings(self):
        msg, _ = self.message()
        # All-uppercase hex is accepted as is.
        w = fresh_wallet()
        _, sig = w.sign(msg)
        self.assertOk(self.revoke(('0x' + w.address[2:].upper(), sig)))
        # A correct EIP-55 mixed-case spelling is accepted.
        w = fresh_wallet()
        while w.address[2:].isdigit() or harness.eip55(w.address)[2:].lower() == \
                harness.eip55(w.address)[2:]:
            w = fresh_wallet()
        _, sig = w.sign(msg)
        good = harness.eip55(w.address)
        self.assertNotEqual(good, w.address)
        # Mixed case failing the checksum: 400 on the address, whatever the signature.
        i = next(i for i, ch in enumerate(good) if i >= 2 and ch.isalpha())
        bad = good[:i] + good[i].swapcase() + good[i + 1:]
        for a in (bad, good[:2] + good[2:].swapcase()):
            if a[2:].lower() == a[2:] or a[2:].upper() == a[2:]:
                continue
            self.assertEnvelope(self.a.request('POST', revoke_path(a, sig)), 400,
                                'invalid_request', field='address')
        self.assertOk(self.revoke((good, sig)))

    def test_malformed_addresses(self):
        _, sig = self.signed()
        for a in ('0x1234', '0x' + 'g' * 40, '1' * 40, '0x' + '1' * 41, '0x' + '1' * 39 + '%20',
                  'xx' + '1' * 40):
            self.assertEnvelope(self.a.request('POST', revoke_path(a, sig)), 400,
                                'invalid_request', field='address')

    # --- refused signatures ---

    def test_missing_parameters(self):
        a, s = self.signed()
        self.assertUnauthenticated(self.a.request('POST', '/api/auth/revoke?address=' + a))
        self.assertUnauthenticated(self.a.request('POST', '/api/auth/revoke?address=%s&signature='
                                                  % a))
        self.assertEnvelope(self.a.request('POST', '/api/auth/revoke?signature=' + s), 400,
                            'invalid_request', field='address')
        self.assertEnvelope(self.a.request('POST', '/api/auth/revoke'), 400, 'invalid_request',
                            field='address')
        self.assertEnvelope(self.a.request('POST', '/api/auth/revoke?address=&signature=' + s),
                            400, 'invalid_request', field='address')
        # None of that consumed the signature.
        self.assertOk(self.revoke((a, s)))

    def test_wrong_address(self):
        msg, _ = self.message()
        w1, w2 = fresh_wallet(), fresh_wallet()
        _, sig = w1.sign(msg)
        self.assertUnauthenticated(self.a.request('POST', revoke_path(w2.address, sig)),
                                   'does not match')
        # A signature over another text (not the sign-in message) fails the same way.
        _, other = w1.sign(msg + ' ')
        self.assertUnauthenticated(self.a.request('POST', revoke_path(w1.address, other)))
        # The right pair still works.
        self.assertOk(self.revoke((w1.address, sig)))

    def test_malformed_signatures(self):
        a, s = self.signed()
        r, sv, v = harness.split_signature(s)
        n = harness.SECP256K1_N
        cases = {
            'bad hex': s[:10] + 'zz' + s[12:],
            'bad hex at the end': s[:-1] + 'g',
            'too short': s[:-4],
            'odd length': s[:-1],
            'too long': s + '00',
            'compact too short': harness.to_compact(s)[:-2],
            # (130 - 2 hex digits would be a well-formed compact signature, not malformed.)
            'high s': harness.high_s(s),
            'high s, v 0/1': harness.to_v01(harness.high_s(s)),
            'v 29': harness.join_signature(r, sv, 29),
            'v 2': harness.join_signature(r, sv, 2),
            'r zero': harness.join_signature(0, sv, v),
            's zero': harness.join_signature(r, 0, v),
            'r = n': harness.join_signature(n, sv, v),
            'r > n': harness.join_signature(n + 1, sv, v),
            'empty after 0x': '0x',
            'percent-encoded junk': '0x%20' + s[2:],
        }
        # The high-s form is the same point: only EIP-2 makes it invalid.
        hr, hs, hv = harness.split_signature(harness.high_s(s))
        self.assertGreater(hs, n // 2)
        self.assertEqual(hr, r)
        for name, bad in cases.items():
            resp = self.a.request('POST', revoke_path(a, bad))
            with self.subTest(name):
                err = self.assertUnauthenticated(resp)
            if name in ('bad hex', 'too short', 'too long', 'high s', 'v 29'):
                self.assertIn('malformed', err['message'].lower(), name)
        # The untouched signature was never consumed by those attempts.
        self.assertOk(self.revoke((a, s)))

    def test_revoked_in_every_spelling(self):
        a, s = self.signed()
        self.assertOk(self.revoke((a, s)))
        for spelled in (s, harness.to_compact(s), harness.to_v01(s), '0x' + s[2:].upper()):
            for svc in (self.a, self.b):
                self.assertUnauthenticated(svc.request('POST', revoke_path(a, spelled)),
                                           'revoked')
        # And with the address in upper case.
        self.assertUnauthenticated(self.a.request('POST', revoke_path('0x' + a[2:].upper(), s)),
                                   'revoked')

    def test_revocation_across_instances(self):
        a, s = self.signed()
        # B verifies it first (and may cache it) through a read that doesn't consume it.
        self.assertEnvelope(self.b.request('GET', probe_path(a, s)), 404, 'not_found')
        self.assertEnvelope(self.b.request('GET', probe_path(a, harness.to_compact(s))), 404,
                            'not_found')
        self.assertOk(self.revoke((a, s), svc=self.a))
        # From the next request on, B refuses it in every spelling, cache or not.
        for spelled in (s, harness.to_compact(s), harness.to_v01(s)):
            self.assertUnauthenticated(self.b.request('POST', revoke_path(a, spelled)),
                                       'revoked')
            self.assertUnauthenticated(self.b.request('GET', probe_path(a, spelled)), 'revoked')
            self.assertUnauthenticated(self.a.request('GET', probe_path(a, spelled)), 'revoked')

    def test_revocation_revoked_via_compact_form(self):
        # Revoking through the compact spelling revokes the 65-byte one on the other instance.
        a, s = self.signed()
        self.assertOk(self.revoke((a, harness.to_compact(s)), svc=self.b))
        self.assertUnauthenticated(self.a.request('POST', revoke_path(a, s)), 'revoked')
        self.assertUnauthenticated(self.a.request('POST', revoke_path(a, harness.to_v01(s))),
                                   'revoked')

    def test_revocation_kept_until_expiry(self):
        a, s = self.signed()
        _, epoch = self.message()
        before = set(self.r.cli('KEYS', '*'))
        self.assertOk(self.revoke((a, s)))
        new = set(self.r.cli('KEYS', '*')) - before
        self.assertEqual(len(new), 1, new)
        key = new.pop()
        self.assertNotIn(s[2:].encode(), key, 'the key is not the raw signature')
        ttl = self.r.cli('TTL', key)
        expires = (epoch + 2) * EPOCH_SECONDS
        self.assertGreater(ttl, 0)
        self.assertLessEqual(abs((time.time() + ttl) - expires), 5,
                             'revocation kept until %d, the signature expires at %d' %
                             (time.time() + ttl, expires))

    def test_unsigned_message_route_needs_no_auth(self):
        # A signature is ignored there; an address asks for its SIWE message (test_siwe.py).
        st, _, body = self.a.request('GET', '/api/auth/message?signature=junk')
        self.assertEqual(st, 200, body)


class ExpiryTest(harness.ServiceTestCase):
    """AUTH_EPOCH_SECONDS=2: a signature over epoch e works in e and e+1, then expires."""

    E = 2

    def test_signature_expires_after_next_epoch(self):
        r = self.redis()
        svc = self.entityd(redis=r, env={'AUTH_EPOCH_SECONDS': self.E}, secret=SECRET)

        def epoch_now():
            return math.floor(time.time() / self.E)

        def wait_epoch(target):
            harness.wait_for(lambda: epoch_now() >= target, (target - epoch_now() + 2) * self.E,
                             interval=0.01, what='epoch %d' % target)

        checked_next = checked_expired = False
        for attempt in range(4):
            # Start right after an epoch boundary so that there's time to sign.
            wait_epoch(epoch_now() + 1)
            msg, e = harness.current_message(svc.port)
            self.assertEqual(msg, harness.signin_message(SECRET, 'entityd.local', self.E, e))
            w1, w2 = fresh_wallet(), fresh_wallet()
            c1, c2 = w1.sign(msg), w2.sign(msg)
            if epoch_now() != e:
                continue
            if not checked_next:
                wait_epoch(e + 1)
                resp = svc.request('POST', revoke_path(*c1))
                if epoch_now() == e + 1:  # answered within epoch e+1: conclusive
                    self.assertOk(resp)
                    checked_next = True
            wait_epoch(e + 2)
            resp = svc.request('POST', revoke_path(*c2))
            if epoch_now() == e + 2:
                self.assertEnvelope(resp, 401, 'unauthenticated', message_contains='expired')
                checked_expired = True
            if checked_next and checked_expired:
                break
        self.assertTrue(checked_next, 'never got a conclusive check within epoch e+1')
        self.assertTrue(checked_expired, 'never got a conclusive check within epoch e+2')


class ZzLogScanTest(harness.ServiceTestCase):
    """Runs last: no signature, and no query string, in anything any entityd wrote."""

    def test_no_signature_in_logs(self):
        # Exercise the refusal paths on a debug-level instance with signatures in the URL.
        r = self.redis()
        svc = self.entityd(redis=r, env={'LOG_LEVEL': 'debug'}, secret=SECRET)
        msg, _ = harness.current_message(svc.port)
        w = fresh_wallet()
        a, s = w.sign(msg)
        other = fresh_wallet()
        for path in (revoke_path(other.address, s),                    # mismatch
                     revoke_path(a, s[:-2]),                           # malformed
                     revoke_path(a, harness.high_s(s)),                # high s
                     revoke_path(a, s) + '&signature=' + s,            # repeated
                     revoke_path(a, s) + '&x=%zz',                     # bad escape
                     '/nope?' + auth_query(a, s),                      # 404
                     '/healthz?' + auth_query(a, s),                   # 200 unsigned route
                     revoke_path(a, s) + '&pad=' + 'p' * 9000,         # 414
                     revoke_path(a, s)):                               # 200
            try:
                svc.request('POST', path)
            except OSError:
                pass
        r.kill()  # and the 503 path, with failed reconnects logged at debug level
        svc.wait_ready(scaled(2), ready=False)
        a2, s2 = fresh_wallet().sign(msg)
        self.assertEnvelope(svc.request('POST', revoke_path(a2, s2)), 503, 'unavailable')
        time.sleep(0.3)
        self.assertEqual(svc.request('GET', '/healthz')[0], 200)

        # Stop every instance of this run so that all output is flushed.
        for e in harness.ENTITYD_INSTANCES:
            if e.alive():
                self.assertEqual(e.stop(), 0, e.stderr()[-3000:])
        issued = {sig.lower() for sig in harness.ISSUED_SIGNATURES}
        self.assertGreater(len(issued), 10)
        parts = set()
        for sig in issued:
            parts.add(sig[:64])          # r
            parts.add(sig[64:128])       # s (or s with the parity bit, compact)
        long_hex = re.compile(r'[0-9a-fA-F]{64}')
        scanned = 0
        revoke_lines = 0
        for e in harness.ENTITYD_INSTANCES:
            text = e.stdout() + '\n' + e.stderr()
            scanned += len(text)
            low = text.lower()
            self.assertNotIn('signature=', low, 'a query string was logged (port %s)' % e.port)
            self.assertNotIn('address=', low, 'a query string was logged (port %s)' % e.port)
            for p in parts:
                self.assertNotIn(p, low, 'a signature was logged (port %s)' % e.port)
            m = long_hex.search(text)
            self.assertIsNone(m, 'a long hex string was logged: %r' % (m and m.group(0)))
            revoke_lines += sum(1 for rec in e.logs() if rec.get('route') == '/api/auth/revoke')
        self.assertGreater(scanned, 0)
        self.assertGreater(revoke_lines, 10, 'the signed requests were not logged at all')


if __name__ == '__main__':
    harness.main()
