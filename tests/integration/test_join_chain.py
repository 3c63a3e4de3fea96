"""Join rules' chain reads (CONTRACT section 16, rpc/joinread.c) against a real local chain:
ganache with a batch reader of Multicall3's interface and OpenZeppelin ERC-20/721/1155 test
tokens (tests/node/join_chain.cjs), read through entityd-joinread (the service's reads, the
service's settings) behind the fault proxy that counts the eth_calls.

Every token leaf kind true and false with what the address has; an ERC-721 leaf with and
without a token id, a reverting ownerOf (no such token, a burnt one) false; a leaf on a contract
that is no token errs alone while the others answer; the block each batch ran at, values
following the chain block by block; 500 addresses in exactly one eth_call per chain; a stalled
chain answers UNAVAILABLE within ETH_RPC_TIMEOUT_MS while another chain's leaves answer; a dead
one at once; past JOIN_RPC_MAX_PER_SECOND a check is CAPPED (no call sent) and a background read
waits for room."""

import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ETH_CALLS, JoinChain, JoinReader, fresh_address, proxy_url, scaled  # noqa: E402

CHAIN = 1337
TIMEOUT_MS = 1500


class JoinChainTest(harness.unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not harness.chain_available():
            raise harness.unittest.SkipTest('tests/node has no ganache or solc')
        cls.chain = JoinChain()
        cls.proxy = cls.chain.proxy()

    @classmethod
    def tearDownClass(cls):
        cls.chain.stop()

    def setUp(self):
        self.readers = []

    def tearDown(self):
        for r in self.readers:
            if r.proc.returncode is None:
                r.stop()  # fails on a sanitizer report or a non-zero exit

    def reader(self, urls=None, **env):
        full = {'ETH_RPC_URLS': urls or '%d=%s' % (CHAIN, proxy_url(self.proxy)),
                'MULTICALL3_ADDRESS': self.chain.multicall,
                'ETH_RPC_TIMEOUT_MS': str(TIMEOUT_MS), 'JOIN_RPC_MAX_PER_SECOND': '1000'}
        full.update(env)
        r = JoinReader(full)
        self.readers.append(r)
        return r

    # rule helpers
    def erc20(self, min_, contract=None, chain=CHAIN):
        return {'erc20': {'chainId': chain, 'contract': contract or self.chain.erc20,
                          'min': str(min_)}}

    def erc721(self, token_id=None, contract=None):
        leaf = {'chainId': CHAIN, 'contract': contract or self.chain.erc721}
        if token_id is not None:
            leaf['tokenId'] = str(token_id)
        return {'erc721': leaf}

    def erc1155(self, token_id, min_):
        return {'erc1155': {'chainId': CHAIN, 'contract': self.chain.erc1155,
                            'tokenId': str(token_id), 'min': str(min_)}}

    def native(self, min_, chain=CHAIN):
        return {'native': {'chainId': chain, 'min': str(min_)}}

    def values(self, answer):
        return [[(v['truth'], v['have']) for v in row] for row in answer['values']]

    def test_every_token_leaf_kind(self):
        a, b = fresh_address(), fresh_address()
        c = self.chain
        c.mint('erc20', a, amount=100)
        c.mint('erc20', b, amount=99)
        c.mint('erc721', a, token_id=101)
        c.mint('erc721', a, token_id=102)
        c.mint('erc1155', a, token_id=5, amount=3)
        c.mint('erc1155', b, token_id=5, amount=2)
        c.set_balance(a, 10 ** 18)
        c.set_balance(b, 10 ** 18 - 1)
        rule = {'all': [self.erc20(100), self.erc721(101), self.erc721(), self.erc1155(5, 3),
                        self.native(10 ** 18), {'role': {'entityID': 'c-' + str(uuid.uuid4()), 'role': 'member'}}]}
        ans = self.reader().read(rule, [a, b])
        self.assertEqual(ans['status'], 'ok', ans)
        self.assertEqual(self.values(ans), [
            [('true', '100'), ('true', '1'), ('true', '2'), ('true', '3'),
             ('true', str(10 ** 18)), ('error', '')],
            [('false', '99'), ('false', '0'), ('false', '0'), ('false', '2'),
             ('false', str(10 ** 18 - 1)), ('error', '')],
        ])

    def test_reverting_owner_of_is_false(self):
        a = fresh_address()
        self.chain.mint('erc721', a, token_id=201)
        self.chain.burn('erc721', token_id=201)
        self.assertIsNone(self.chain.balance('erc721', token_id=201))
        ans = self.reader().read({'any': [self.erc721(201), self.erc721(999999)]}, [a])
        self.assertEqual(ans['status'], 'ok', ans)
        self.assertEqual(self.values(ans), [[('false', '0'), ('false', '0')]])

    def test_a_leaf_on_no_token_errs_alone(self):
        a = fresh_address()
        self.chain.mint('erc20', a, amount=7)
        # The batch reader itself has no balanceOf (its call reverts); the funder is no
        # contract at all (its call answers nothing).
        rule = {'any': [self.erc20(1, contract=self.chain.multicall),
                        self.erc20(1, contract=self.chain.funder), self.erc20(5),
                        self.erc721(1, contract=self.chain.erc20)]}
        ans = self.reader().read(rule, [a])
        self.assertEqual(ans['status'], 'ok', ans)
        got = self.values(ans)[0]
        self.assertEqual(got[0], ('error', ''))
        self.assertEqual(got[1], ('error', ''))
        self.assertEqual(got[2], ('true', '7'))
        self.assertEqual(got[3], ('false', '0'))  # ownerOf on a non-ERC-721 reverts: false

    def test_blocks(self):
        a, b = fresh_address(), fresh_address()
        self.chain.mint('erc20', a, amount=10)
        r = self.reader()
        block = self.chain.block()
        ans = r.read({'all': [self.erc20(10)]}, [a, b])
        self.assertEqual(ans['blocks'], {str(CHAIN): block})
        self.assertEqual(self.values(ans), [[('true', '10')], [('false', '0')]])
        moved = self.chain.transfer('erc20', a, b, amount=10)
        ans = r.read({'all': [self.erc20(10)]}, [a, b])
        self.assertEqual(ans['blocks'], {str(CHAIN): moved})
        self.assertEqual(self.values(ans), [[('false', '0')], [('true', '10')]])

    def test_500_addresses_one_call_per_chain(self):
        holders = [fresh_address() for _ in range(500)]
        self.chain.mint('erc20', holders[0], amount=3)
        self.chain.mint('erc1155', holders[499], token_id=9, amount=1)
        self.chain.set_balance(holders[250], 5)
        # The same ganache named as a second chain, through a proxy of its own: one call each.
        other = self.chain.proxy()
        urls = '%d=%s,1=%s' % (CHAIN, proxy_url(self.proxy), proxy_url(other))
        rule = {'atLeast': 1, 'of': [self.erc20(1), self.erc1155(9, 1), self.native(1, chain=1)]}
        # ganache runs a batch of 1,001 calls in seconds: a deadline for it, not for a provider.
        r = self.reader(urls, ETH_RPC_TIMEOUT_MS=str(int(scaled(60) * 1000)))
        before, before_other = self.proxy.counted(ETH_CALLS), other.counted(ETH_CALLS)
        ans = r.read(rule, holders, timeout=scaled(120))
        self.assertEqual(ans['status'], 'ok', {k: ans[k] for k in ('status', 'blocks')})
        self.assertEqual(self.proxy.counted(ETH_CALLS) - before, 1)
        self.assertEqual(other.counted(ETH_CALLS) - before_other, 1)
        self.assertEqual(set(ans['blocks']), {str(CHAIN), '1'})
        vals = self.values(ans)
        self.assertEqual(len(vals), 500)
        self.assertEqual(vals[0][0], ('true', '3'))
        self.assertEqual(vals[499][1], ('true', '1'))
        self.assertEqual(vals[250][2], ('true', '5'))
        trues = sum(1 for row in vals for v in row if v[0] == 'true')
        self.assertEqual(trues, 3)

    def test_stalled_chain_is_unavailable_within_the_timeout(self):
        a = fresh_address()
        self.chain.mint('erc20', a, amount=1)
        stalled = self.chain.proxy()
        urls = '%d=%s,1=%s' % (CHAIN, proxy_url(self.proxy), proxy_url(stalled))
        r = self.reader(urls)
        rule = {'any': [self.erc20(1), self.native(1, chain=1)]}
        self.assertEqual(r.read(rule, [a])['status'], 'ok')
        stalled.stall()
        t0 = time.monotonic()
        ans = r.read(rule, [a])
        took = time.monotonic() - t0
        self.assertEqual(ans['status'], 'unavailable')
        self.assertGreaterEqual(ans['ms'], TIMEOUT_MS * 0.9)
        self.assertLess(took, TIMEOUT_MS / 1000.0 + scaled(5))
        # The chain that answered still gives its leaf; the stalled one's errs, its block 0.
        self.assertEqual(self.values(ans), [[('true', '1'), ('error', '')]])
        self.assertEqual(ans['blocks']['1'], 0)
        stalled.release()
        self.assertEqual(r.read(rule, [a])['status'], 'ok')
        # A chain gone (nobody listens): unavailable at once.
        stalled.stop()
        t0 = time.monotonic()
        ans = r.read(rule, [a])
        self.assertEqual(ans['status'], 'unavailable')
        self.assertLess(time.monotonic() - t0, TIMEOUT_MS / 1000.0)

    def test_cap(self):
        a = fresh_address()
        self.chain.mint('erc20', a, amount=1)
        r = self.reader(JOIN_RPC_MAX_PER_SECOND='2')
        rule = {'all': [self.erc20(1)]}
        before = self.proxy.counted(ETH_CALLS)
        ids = r.send(rule, [a], times=3)
        got = r.answers(3)
        statuses = sorted(got[i]['status'] for i in ids)
        self.assertEqual(statuses, ['capped', 'ok', 'ok'])
        capped = [got[i] for i in ids if got[i]['status'] == 'capped'][0]
        self.assertEqual(capped['retryAfter'], 1)
        self.assertEqual(self.proxy.counted(ETH_CALLS) - before, 2)
        # Background reads wait for room instead: all answered, the cap kept (2 a second).
        time.sleep(1.1)  # the bucket full again
        before = self.proxy.counted(ETH_CALLS)
        t0 = time.monotonic()
        ids = r.send(rule, [a], background=True, times=4)
        got = r.answers(4, timeout=scaled(30))
        took = time.monotonic() - t0
        self.assertEqual([got[i]['status'] for i in ids], ['ok'] * 4)
        self.assertEqual(self.proxy.counted(ETH_CALLS) - before, 4)
        self.assertGreaterEqual(took, 0.8)  # two waited for a token each, 0.5 s apart


if __name__ == '__main__':
    harness.main()
