"""Contract-wallet checks cannot be made a flood, and a revoked contract sign-in stays revoked
(CONTRACT section 12), against a JSON-RPC stand-in this test starts on loopback: it counts the
calls by method, answers eth_getCode with no code for every address but one contract, and, for
that contract, answers isValidSignature with the magic value for any signature starting with a
known prefix over a known hash (a Safe ignores the bytes past its owners' signatures), as a
Safe would. Single requests and batches are both answered.

- An address is asked its code once; one without code is refused 401 with no eth_call, for
  random addresses and for a plain wallet's bad signatures alike.
- Lookups of addresses not known to hold code are capped per instance
  (ETH_RPC_MAX_PER_SECOND): past the cap 503 with Retry-After, while the known contract keeps
  being checked.
- Revoking a contract-verified signature revokes every sign-in of that address over the same
  epoch's messages: the same bytes plus "00", other bytes, the SIWE message; on a second
  instance too, whether it had the signature cached or not."""

import http.server
import json
import os
import secrets
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import auth_query, scaled  # noqa: E402

MAGIC = '0x1626ba7e' + '00' * 28
NOT_MAGIC = '0x' + 'ff' * 32
CAP = 5


class RpcStandIn:
    """A JSON-RPC endpoint on loopback that counts calls by method. `contract` holds code;
    `accept` maps a message hash (hex, no 0x) to the signature prefixes (bytes) the contract
    accepts over it."""

    def __init__(self, contract):
        self.contract = contract.lower()
        self.accept = {}
        self.counts = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get('Content-Length', '0'))))
                if isinstance(body, list):
                    out = [outer.answer(item) for item in body]
                else:
                    out = outer.answer(body)
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.server.daemon_threads = True
        self.url = 'http://127.0.0.1:%d/' % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, item):
        method = item.get('method')
        with self.lock:
            self.counts[method] = self.counts.get(method, 0) + 1
            if method == 'eth_getCode':
                key = ('eth_getCode', item['params'][0].lower())
                self.counts[key] = self.counts.get(key, 0) + 1
        result = '0x'
        if method == 'eth_getCode' and item['params'][0].lower() == self.contract:
            result = '0x6080604052'
        elif method == 'eth_call' and item['params'][0]['to'].lower() == self.contract:
            data = bytes.fromhex(item['params'][0]['data'][2:])
            h, n = data[4:36].hex(), int.from_bytes(data[68:100], 'big')
            sig = data[100:100 + n]
            ok = any(sig.startswith(p) for p in self.accept.get(h, ()))
            result = MAGIC if ok else NOT_MAGIC
        return {'jsonrpc': '2.0', 'id': item.get('id'), 'result': result}

    def count(self, what):
        with self.lock:
            return self.counts.get(what, 0)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def probe(svc, address, signature):
    """A signed read of an unknown entity: 404 once signed in, 401/503 otherwise."""
    return svc.request('GET', '/api/entities/c-%s?%s' % (uuid.uuid4(),
                                                         auth_query(address, signature)))


def random_address():
    return '0x' + secrets.token_hex(20)


class RpcGateTest(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.contract = harness.eip55('0x' + secrets.token_hex(20))
        cls.rpc = RpcStandIn(cls.contract)
        try:
            cls.r = cls.class_redis()
            env = {'ETH_RPC_URL': cls.rpc.url}
            # Two instances on one Redis (revocation lives there); a third, capped low, on its
            # own Redis, so that revoking the contract's sign-ins leaves its tests alone.
            cls.a = cls.class_entityd(redis=cls.r, env=env)
            cls.b = cls.class_entityd(redis=cls.r, env=env)
            cls.r2 = cls.class_redis()
            cls.capped = cls.class_entityd(redis=cls.r2,
                                           env=dict(env, ETH_RPC_MAX_PER_SECOND=CAP))
            cls.msg, cls.epoch = harness.current_message(cls.a.port)
            cls.wallets = harness.Wallet.random(4)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, 'rpc', None) is not None:
            cls.rpc.stop()
        super().tearDownClass()

    def accept(self, message, prefix):
        """The contract accepts signatures starting with prefix over message."""
        self.rpc.accept.setdefault(harness.personal_hash(message)[2:], []).append(prefix)

    def siwe_message(self, svc, address):
        st, _, b = svc.request('GET', '/api/auth/message?address=' + address)
        self.assertEqual(st, 200, b)
        return b['data']['message']

    def test_random_addresses_one_code_lookup_each_and_no_eth_call(self):
        calls, lookups = self.rpc.count('eth_call'), self.rpc.count('eth_getCode')
        other = self.wallets[0].sign(self.msg)[1]  # a key's signature, of another address
        addrs = [random_address() for _ in range(20)]
        for a in addrs:
            for sig in ('0x' + secrets.token_hex(100), other, '0x' + secrets.token_hex(65)):
                st, _, b = probe(self.a, a, sig)
                self.assertEqual(st, 401, (a, sig, b))
        self.assertEqual(self.rpc.count('eth_call') - calls, 0, 'eth_call for addresses '
                         'without code')
        self.assertEqual(self.rpc.count('eth_getCode') - lookups, len(addrs),
                         'one eth_getCode per address')
        for a in addrs:
            self.assertEqual(self.rpc.count(('eth_getCode', a)), 1, a)

    def test_plain_wallet_bad_signatures_401_without_eth_call(self):
        w, other = self.wallets[1], self.wallets[2]
        calls = self.rpc.count('eth_call')
        bad = [other.sign(self.msg + ' %d' % i)[1] for i in range(10)]
        bad += ['0x' + secrets.token_hex(65 + i) for i in range(20)]
        with ThreadPoolExecutor(8) as ex:
            statuses = list(ex.map(lambda s: probe(self.a, w.address, s)[0], bad))
        self.assertEqual(statuses, [401] * len(bad))
        self.assertEqual(self.rpc.count('eth_call') - calls, 0)
        self.assertEqual(self.rpc.count(('eth_getCode', w.address.lower())), 1)
        # The wallet's own key signs in, asking the RPC nothing.
        lookups = self.rpc.count('eth_getCode')
        st, _, b = probe(self.a, w.address, w.sign(self.msg)[1])
        self.assertEqual(st, 404, b)
        self.assertEqual((self.rpc.count('eth_call') - calls,
                          self.rpc.count('eth_getCode') - lookups), (0, 0))

    def test_cap_on_unknown_addresses_spares_known_contracts(self):
        svc = self.capped
        prefix = b'\x0c\xa9' + secrets.token_bytes(8)
        self.accept(self.msg, prefix)
        # The contract's code becomes known with its first sign-in.
        st, _, b = probe(svc, self.contract, '0x' + (prefix + secrets.token_bytes(20)).hex())
        self.assertEqual(st, 404, b)
        lookups, calls = self.rpc.count('eth_getCode'), self.rpc.count('eth_call')
        flood = [random_address() for _ in range(40)]
        t0 = time.monotonic()
        with ThreadPoolExecutor(10) as ex:
            answers = list(ex.map(lambda a: probe(svc, a, '0x' + secrets.token_hex(80)), flood))
        elapsed = time.monotonic() - t0
        statuses = [st for st, _, _ in answers]
        self.assertEqual(set(statuses) - {401, 503}, set(), statuses)
        refused = [(h, b) for st, h, b in answers if st == 503]
        self.assertGreaterEqual(len(refused), 1, 'no 503 past ETH_RPC_MAX_PER_SECOND')
        for h, b in refused:
            self.assertEqual(b['error']['code'], 'unavailable', b)
            self.assertGreaterEqual(int(h.get('retry-after', '0')), 1, h)
        # At most the bucket (CAP) plus what refilled meanwhile reached the RPC.
        sent = self.rpc.count('eth_getCode') - lookups
        self.assertLessEqual(sent, CAP + CAP * elapsed + 1, (sent, elapsed))
        self.assertEqual(sent, statuses.count(401), statuses)
        self.assertEqual(self.rpc.count('eth_call') - calls, 0)
        # While the cap is spent, the known contract is still checked (new signatures, each
        # one eth_call batch) and unknown addresses are still refused.
        for i in range(5):
            st, h, b = probe(svc, random_address(), '0x' + secrets.token_hex(80))
            if st == 503:
                break
        self.assertEqual(st, 503, (h, b))
        before = self.rpc.count('eth_call')
        for i in range(5):
            st, _, b = probe(svc, self.contract, '0x' + (prefix + secrets.token_bytes(20)).hex())
            self.assertEqual(st, 404, b)
        self.assertEqual(self.rpc.count('eth_call') - before, 4 * 5, 'batches of 4 eth_calls')

    def test_revoked_contract_signin_stays_revoked(self):
        prefix = b'\x5a\xfe' + secrets.token_bytes(8)
        siwe_prefix = b'\x51\x3e' + secrets.token_bytes(8)
        self.accept(self.msg, prefix)
        self.accept(self.siwe_message(self.a, self.contract), siwe_prefix)
        sig = '0x' + (prefix + secrets.token_bytes(60)).hex()
        siwe_sig = '0x' + (siwe_prefix + secrets.token_bytes(60)).hex()
        # Signed in on both instances (b now has both signatures cached), then revoked on a.
        for svc in (self.a, self.b):
            for s in (sig, siwe_sig):
                st, _, b = probe(svc, self.contract, s)
                self.assertEqual(st, 404, b)
        st, _, b = self.a.request('POST', '/api/auth/revoke?' + auth_query(self.contract, sig))
        self.assertEqual(st, 200, b)
        variants = {
            'the same bytes': sig,
            'the same plus 00': sig + '00',
            'other bytes past the owners': '0x' + (prefix + secrets.token_bytes(61)).hex(),
            'the SIWE message, cached on b': siwe_sig,
            'the SIWE message, new bytes': '0x' + (siwe_prefix + secrets.token_bytes(30)).hex(),
        }
        # b learns of the revocation through its read cache's invalidation, which may trail
        # the revoke's answer by a moment.
        harness.wait_for(lambda: probe(self.b, self.contract, sig)[0] == 401, scaled(5),
                         what='the revocation reaching the second instance')
        for svc in (self.a, self.b):
            for what, s in variants.items():
                with self.subTest(instance='a' if svc is self.a else 'b', signature=what):
                    st, _, b = probe(svc, self.contract, s)
                    self.assertEqual(st, 401, b)
                    self.assertIn('revoked', b['error']['message'], b)
        # A write too (its revocation check goes first, not with a read).
        st, _, b = self.b.request('POST', '/api/auth/revoke?' +
                                  auth_query(self.contract, sig + '0000'))
        self.assertEqual(st, 401, b)


if __name__ == '__main__':
    harness.main()
