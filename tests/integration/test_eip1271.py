"""Contract wallets (CONTRACT section 11, EIP-1271) against a real local chain: ganache with
Safe 1.4.1 (tests/node/safe_chain.js). A Safe signs in through its owners' signatures and
writes as an entity's owner; too few or foreign owners are refused; an RPC that is down or
stalled answers that sign-in 503 within the timeout while key-signed sign-ins keep their pace;
the same contract signature flooding in makes one RPC call."""

import os
import socket
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import nodetools  # noqa: E402
from harness import auth_query, FaultProxy, metric, probe_path, scaled  # noqa: E402

STALL_TIMEOUT_MS = 2000
CALLS, LOOKUPS, REQUEST = rb'"eth_call"', rb'"eth_getCode"', rb'POST /'


class StalledListener:
    """Accepts TCP connections and never answers (nor reads)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        self.sock.settimeout(0.2)
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
            except OSError:
                continue

    def stop(self):
        self.stopping = True
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


def closed_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


@harness.unittest.skipUnless(nodetools.available(), 'tests/node tools are not installed')
class Eip1271Test(harness.ServiceTestCase):

    @classmethod
    def setUpClass(cls):
        cls.chain = nodetools.SafeChain()
        try:
            # The chain's RPC behind the fault proxy, which counts the requests holding
            # eth_calls (CALLS) and eth_getCode lookups (LOOKUPS), and passes them on to the
            # path the chain serves ('/'): the URL's path and query are secrets to keep.
            cls.proxy = FaultProxy(urllib.parse.urlsplit(cls.chain.rpc).port).start()
            cls.proxy.count(CALLS, per=REQUEST)
            cls.proxy.count(LOOKUPS, per=REQUEST)
            cls.proxy.rewrite(rb'POST /v3/pathkey\?apikey=topsecret ', b'POST / ')
            cls.rpc_url = 'http://user:secretpass@127.0.0.1:%d/v3/pathkey?apikey=topsecret' % \
                cls.proxy.port
            cls.stall = StalledListener()
            cls.r = cls.class_redis()
            cls.svc = cls.class_entityd(redis=cls.r, env={'ETH_RPC_URL': cls.rpc_url,
                                                          'LOG_LEVEL': 'debug'})
            cls.plain = cls.class_entityd(redis=cls.r)
            cls.down = cls.class_entityd(redis=cls.r, env={
                'ETH_RPC_URL': 'http://127.0.0.1:%d' % closed_port()})
            cls.stalled = cls.class_entityd(redis=cls.r, env={
                'ETH_RPC_URL': 'http://127.0.0.1:%d' % cls.stall.port,
                'ETH_RPC_TIMEOUT_MS': STALL_TIMEOUT_MS, 'ETH_RPC_MAX_INFLIGHT': 4})
            cls.one = cls.chain.safe('oneOfOne')
            cls.two = cls.chain.safe('twoOfThree')
            cls.msg, cls.epoch = harness.current_message(cls.svc.port)
            cls.hash = nodetools.personal_hash(cls.msg)
            cls.eoas = harness.Wallet.random(2)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for name in ('stall', 'proxy', 'chain'):
            obj = getattr(cls, name, None)
            if obj is not None:
                obj.stop()
        super().tearDownClass()

    def sign_in(self, svc, address, sig):
        return svc.request('GET', probe_path(address, sig))

    def test_one_of_one_safe_writes_as_owner(self):
        sig = self.chain.sign(self.one, self.hash, [0])
        creator = self.eoas[0]
        body = {'name': 'Safe Guild', 'description': '', 'ownerAddresses': [self.one],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': ''}
        st, _, b = self.svc.request('POST', '/api/entities?' + creator.query(self.msg), body)
        self.assertEqual(st, 201, b)
        eid = b['data']['id']
        update = dict(body, id=eid, description='renamed by the Safe')
        st, _, b = self.svc.request('POST', '/api/entities?' + auth_query(self.one, sig), update)
        self.assertEqual(st, 200, b)
        self.assertEqual(b['data']['description'], 'renamed by the Safe')
        # The creator, not an owner, may not.
        st, _, b = self.svc.request('POST', '/api/entities?' + creator.query(self.msg), update)
        self.assertEqual(st, 403, b)
        # Without ETH_RPC_URL the same signature is refused as today.
        st, _, b = self.sign_in(self.plain, self.one, sig)
        self.assertEqual(st, 401, b)

    def test_two_of_three(self):
        good = self.chain.sign(self.two, self.hash, [0, 2])
        st, _, b = self.sign_in(self.svc, self.two, good)
        self.assertEqual(st, 404, b)
        too_few = self.chain.sign(self.two, self.hash, [1])
        st, _, b = self.sign_in(self.svc, self.two, too_few)
        self.assertEqual(st, 401, b)
        wrong_owner = self.chain.sign(self.two, self.hash, [1, 3])
        st, _, b = self.sign_in(self.svc, self.two, wrong_owner)
        self.assertEqual(st, 401, b)
        # Good owners' signatures presented for another Safe, or another message's hash.
        st, _, b = self.sign_in(self.svc, self.one, good)
        self.assertEqual(st, 401, b)
        other = self.chain.sign(self.two, '0x' + '42' * 32, [0, 1])
        st, _, b = self.sign_in(self.svc, self.two, other)
        self.assertEqual(st, 401, b)
        # An EOA that is no contract: its "signature" of hex bytes is refused.
        st, _, b = self.sign_in(self.svc, self.eoas[1].address, good)
        self.assertEqual(st, 401, b)

    def test_siwe_message_of_the_safe(self):
        st, _, b = self.svc.request('GET', '/api/auth/message?address=' + self.two)
        self.assertEqual(st, 200, b)
        h = nodetools.personal_hash(b['data']['message'])
        sig = self.chain.sign(self.two, h, [1, 2])
        st, _, b = self.sign_in(self.svc, self.two, sig)
        self.assertEqual(st, 404, b)

    def test_revoked_contract_signature(self):
        # Revoking revokes every sign-in of the Safe over this epoch's messages: on a Redis of
        # its own, so that the other tests' sign-ins of the same Safe stay valid.
        svc = self.entityd(redis=self.redis(), env={'ETH_RPC_URL': self.rpc_url})
        sig = self.chain.sign(self.two, self.hash, [0, 1])
        st, _, b = self.sign_in(svc, self.two, sig)
        self.assertEqual(st, 404, b)
        # The Safe reads its owners' signatures and ignores what follows: a byte more, or
        # other owners, sign in as well (and are cached from now on).
        other = self.chain.sign(self.two, self.hash, [1, 2])
        for s in (sig + '00', other):
            st, _, b = self.sign_in(svc, self.two, s)
            self.assertEqual(st, 404, b)
        st, _, b = svc.request('POST', '/api/auth/revoke?' + auth_query(self.two, sig))
        self.assertEqual(st, 200, b)
        for s in (sig, sig + '00', other):
            st, _, b = self.sign_in(svc, self.two, s)
            self.assertEqual(st, 401, b)
            self.assertIn('revoked', b['error']['message'])

    def test_malformed_stays_401(self):
        for sig in ('0x' + 'ab' * 2049, '0x' + 'a' * 131, '0x', 'ab' * 65, '0x' + 'zz' * 65):
            st, _, b = self.sign_in(self.svc, self.two, sig)
            self.assertEqual(st, 401, (sig[:20], b))

    def test_flood_makes_one_call(self):
        sig = self.chain.sign(self.two, self.hash, [1, 2])
        before, lookups = self.proxy.counted(CALLS), self.proxy.counted(LOOKUPS)
        with ThreadPoolExecutor(50) as ex:
            statuses = list(ex.map(lambda _: self.sign_in(self.svc, self.two, sig)[0], range(50)))
        self.assertEqual(statuses, [404] * 50)
        self.assertEqual(self.proxy.counted(CALLS) - before, 1, 'one RPC call for 50 sign-ins')
        # A refused signature flooding in: one call, then remembered.
        bad = self.chain.sign(self.two, self.hash, [3])
        before = self.proxy.counted(CALLS)
        with ThreadPoolExecutor(50) as ex:
            statuses = list(ex.map(lambda _: self.sign_in(self.svc, self.two, bad)[0], range(50)))
        self.assertEqual(statuses, [401] * 50)
        self.assertEqual(self.proxy.counted(CALLS) - before, 1)
        st, _, _ = self.sign_in(self.svc, self.two, bad)
        self.assertEqual((st, self.proxy.counted(CALLS) - before), (401, 1))
        # The Safe's code was asked once at most, whatever came before.
        self.assertLessEqual(self.proxy.counted(LOOKUPS) - lookups, 1)
        self.assertGreaterEqual(metric(self.svc, 'entityd_eth_rpc_calls_total', 0.0), 2)

    def test_rpc_credentials_never_logged(self):
        sig = self.chain.sign(self.one, self.hash, [0])
        self.sign_in(self.svc, self.one, sig)
        logs = open(self.svc.stdout_path).read() + self.svc.stderr()
        for secret in ('secretpass', 'topsecret', 'pathkey', 'user:'):
            self.assertNotIn(secret, logs)
        self.assertIn('127.0.0.1:%d' % self.proxy.port, logs)

    def test_rpc_down_is_503_and_eoas_sign_in(self):
        sig = self.chain.sign(self.two, self.hash, [0, 1])
        t0 = time.monotonic()
        st, h, b = self.sign_in(self.down, self.two, sig)
        self.assertEqual(st, 503, b)
        self.assertEqual(b['error']['code'], 'unavailable')
        self.assertEqual(h.get('retry-after'), '1', h)
        self.assertLess(time.monotonic() - t0, scaled(2))
        w = self.eoas[1]
        st, _, b = self.sign_in(self.down, w.address, w.sign(self.msg)[1])
        self.assertEqual(st, 404, b)

    def eoa_rate(self, svc, creds, seconds):
        """Sign-ins with new signatures per second, one at a time, for up to seconds."""
        n = 0
        t0 = time.monotonic()
        slowest = 0
        for a, s in creds:
            t1 = time.monotonic()
            st, _, b = self.sign_in(svc, a, s)
            slowest = max(slowest, time.monotonic() - t1)
            self.assertEqual(st, 404, b)
            n += 1
            if time.monotonic() - t0 >= seconds:
                break
        return n / (time.monotonic() - t0), slowest

    def test_rpc_stalled_is_503_within_timeout_and_eoas_keep_their_rate(self):
        # The machine is shared and loaded: a burst elsewhere can slow one window, so the
        # pace is compared up to three times (fresh signatures each), and must hold once; a
        # loop held up by the stalled RPC would fail every time. The 503s and their timing
        # must hold every time.
        rates = []
        for attempt in range(3):
            baseline, during, slowest = self.stall_round(attempt)
            rates.append((round(baseline), round(during)))
            print('EOA sign-ins: %.0f/s before, %.0f/s during the stall (slowest %.3f s)' %
                  (baseline, during, slowest), file=sys.stderr)
            # No EOA sign-in waited for the stalled calls.
            self.assertLess(slowest, STALL_TIMEOUT_MS / 1000 * 0.9,
                            'an EOA sign-in took %.3f s' % slowest)
            if during > 0.25 * baseline:
                return
        self.fail('EOA sign-ins slowed down during the stall, every time: %s' % rates)

    def stall_round(self, attempt):
        """Six new contract signatures against the stalled RPC (four in flight, two over
        ETH_RPC_MAX_INFLIGHT) while EOA sign-ins with new signatures run one at a time:
        (EOA rate before, EOA rate during, slowest EOA sign-in during)."""
        out = harness._run_sign(['--random', '5000', '--message', '-'], stdin=self.msg.encode())
        creds = [harness._parse_sign_line(l) for l in out.splitlines() if l.strip()]
        window = STALL_TIMEOUT_MS / 1000 * 0.6
        baseline, _ = self.eoa_rate(self.stalled, creds[:2500], window)
        sigs = [self.chain.sign(self.two, '0x%064x' % (attempt * 100 + i), [0, 1])
                for i in range(6)]
        results = {}

        def stalled_sign_in(i):
            t0 = time.monotonic()
            st, h, b = self.sign_in(self.stalled, self.two, sigs[i])
            results[i] = (st, time.monotonic() - t0, h)

        threads = [threading.Thread(target=stalled_sign_in, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        time.sleep(0.1)  # all six sent
        during, slowest = self.eoa_rate(self.stalled, creds[2500:], window)
        for t in threads:
            t.join(scaled(10))
        statuses = sorted(st for st, _, _ in results.values())
        self.assertEqual(statuses, [503] * 6, results)
        for st, _, h in results.values():
            self.assertEqual(h.get('retry-after'), '1', h)
        # Four in flight (ETH_RPC_MAX_INFLIGHT) wait out the timeout; two more are refused
        # at once: none waits much longer than the timeout.
        elapsed = sorted(e for _, e, _ in results.values())
        self.assertLess(elapsed[1], STALL_TIMEOUT_MS / 1000, elapsed)
        for e in elapsed[2:]:
            self.assertGreater(e, STALL_TIMEOUT_MS / 1000 * 0.9, elapsed)
            self.assertLess(e, STALL_TIMEOUT_MS / 1000 + scaled(1.5), elapsed)
        return baseline, during, slowest

    def test_shutdown_with_a_check_in_flight(self):
        """SIGTERM while a check waits on a stalled RPC: the sign-in is answered 503 once the
        drain ends, and the process exits 0 with nothing leaked (ASan), well before the
        check's own deadline."""
        svc = self.entityd(redis=self.r, env={
            'ETH_RPC_URL': 'http://127.0.0.1:%d' % self.stall.port,
            'ETH_RPC_TIMEOUT_MS': 60000, 'SHUTDOWN_TIMEOUT_MS': 500})
        sig = self.chain.sign(self.two, '0x%064x' % 0xdead, [0, 1])
        accepted = len(self.stall.conns)
        result = {}

        def sign_in():
            try:
                result['status'] = self.sign_in(svc, self.two, sig)[0]
            except Exception as e:  # the connection closed by the shutdown
                result['error'] = repr(e)

        t = threading.Thread(target=sign_in)
        t.start()
        harness.wait_for(lambda: len(self.stall.conns) > accepted, scaled(5),
                         what='the check reaching the stalled RPC')
        t0 = time.monotonic()
        rc = svc.stop(timeout=scaled(20))
        elapsed = time.monotonic() - t0
        t.join(scaled(10))
        self.assertEqual(rc, 0, svc.stderr()[-2000:])
        self.assertLess(elapsed, scaled(5), 'shutdown waited %.1f s' % elapsed)
        self.assertIn(result.get('status', 503), (503,), result)
        self.assertIsNone(svc.sanitizer_report())


if __name__ == '__main__':
    harness.main()
