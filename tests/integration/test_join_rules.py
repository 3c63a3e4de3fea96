"""Join rules (CONTRACT section 16) through the routes. Without any chain: an entity's rule set,
read and deleted by its owners and admins, every refusal with its field path; the check's
answer leaf by leaf (role and level leaves under all, any, atLeast and not) and its cache;
joining (eligible, refused with the failing leaves, again), `via` in the users list, a
force-add making a rules member manual, removals taking rules members off the re-check's keys,
and the events. With a ganache chain (tests/node/join_chain.cjs) behind the fault proxy: each
token leaf kind checked and joined by, and a stalled chain answering 503."""

import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402


def ekey(eid, suffix=''):
    return 'ent:{%s}%s' % (eid, suffix)


def role(eid, r):
    return {'role': {'entityID': eid, 'role': r}}


def level(eid, lv):
    return {'level': {'entityID': eid, 'lvID': lv}}


class JoinRulesTest(harness.ServiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(60)
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env={'RATE_WRITES_PER_MINUTE': '0',
                                                      'JOIN_RECHECK_SECONDS': '2',
                                                      'JOIN_CHECK_CACHE_MS': '1500'})
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])

    def cli(self, *args):
        v = self.r.cli(*args, timeout=scaled(10))
        if isinstance(v, bytes):
            return v.decode()
        if isinstance(v, list):
            return [x.decode() if isinstance(x, bytes) else x for x in v]
        return v

    def req(self, method, path, w=None, body=None):
        if w is not None:
            path += ('&' if '?' in path else '?') + self.signer.query(w)
        return harness.request(self.port, method, path, body=body, timeout=scaled(10))

    def entity(self, owner, public=True):
        return self.assertOk(self.req('POST', '/api/entities', owner, {
            'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
            'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
            'imageUrl': '', 'public': public}), 201)['data']['id']

    def force_add(self, w, eid, *addrs):
        return self.assertOk(self.req('POST', '/api/entities/%s/force-add' % eid, w,
                                      {'addresses': [a.address for a in addrs],
                                       'Chain': 'eth'}))

    def set_rule(self, w, eid, rule):
        return self.req('POST', '/api/entities/%s/join-rules' % eid, w, {'rule': rule})

    def check(self, w, eid, addr):
        return self.req('GET', '/api/entities/%s/join-rules/check?for=%s' % (eid, addr), w)

    def join(self, w, eid):
        return self.req('POST', '/api/entities/%s/join' % eid, w, {})

    def users(self, w, eid):
        return self.assertOk(self.req('GET', '/api/entities/%s/users' % eid, w))['users']

    def events(self, w, eid):
        return self.assertOk(self.req('GET', '/api/entities/%s/events' % eid, w))['data']

    def setup_pair(self):
        """Entity B (public) with an owner, an admin and a member; entity A, owned by B's
        owner, whose rule names B."""
        owner, admin, member, stranger = [self.pool.pop() for _ in range(4)]
        b = self.entity(owner)
        self.assertOk(self.req('POST', '/api/entities/%s/admins' % b, owner,
                               {'addresses': [admin.address]}))
        self.force_add(owner, b, member)
        a = self.entity(owner)
        return a, b, owner, admin, member, stranger

    # ---- the rule ----

    def test_rule_set_read_delete(self):
        a, b, owner, admin, member, stranger = self.setup_pair()
        self.assertEnvelope(self.req('GET', '/api/entities/%s/join-rules' % a, owner), 404,
                         'not_found')
        rule = {'any': [role(b, 'member'), {'not': role(b, 'admin')}]}
        got = self.assertOk(self.set_rule(owner, a, rule))['data']
        self.assertEqual(got['rule'], rule)
        self.assertEqual(got['updatedBy'], owner.address)
        read = self.assertOk(self.req('GET', '/api/entities/%s/join-rules' % a, owner))['data']
        self.assertEqual(read, got)
        # admins may too; members and strangers may not
        self.assertOk(self.req('POST', '/api/entities/%s/admins' % a, owner,
                               {'addresses': [admin.address]}))
        self.assertOk(self.req('GET', '/api/entities/%s/join-rules' % a, admin))
        self.assertEnvelope(self.req('GET', '/api/entities/%s/join-rules' % a, stranger), 403,
                         'forbidden')
        self.assertEnvelope(self.set_rule(stranger, a, rule), 403, 'forbidden')
        self.assertEnvelope(self.req('DELETE', '/api/entities/%s/join-rules' % a, stranger), 403,
                         'forbidden')
        self.assertOk(self.req('DELETE', '/api/entities/%s/join-rules' % a, admin))
        self.assertEnvelope(self.req('GET', '/api/entities/%s/join-rules' % a, owner), 404,
                         'not_found')
        self.assertEnvelope(self.req('DELETE', '/api/entities/%s/join-rules' % a, owner), 404,
                         'not_found')
        types = [e['type'] for e in self.events(owner, a) if e['type'] == 'joinrules.updated']
        self.assertEqual(len(types), 2)
        datas = [e['data'] for e in self.events(owner, a) if e['type'] == 'joinrules.updated']
        self.assertEqual(datas[0]['rule'], rule)
        self.assertIsNone(datas[1]['rule'])

    def test_rule_refusals_name_their_field(self):
        a, b, owner, admin, member, stranger = self.setup_pair()
        private_owner = self.pool.pop()
        p = self.entity(private_owner, public=False)
        leaf = role(b, 'member')
        cases = [
            ({}, 'rule'),
            ({'rule': {'all': [leaf, {'bogus': 1}]}}, 'rule.all[1]'),
            ({'rule': {'all': [leaf] * 33}}, 'rule'),
            ({'rule': {'all': [{'all': [{'all': [{'all': [leaf]}]}]}]}}, 'rule.all[0].all[0].all[0]'),
            ({'rule': {'erc20': {'chainId': 1, 'contract': '0x' + '11' * 20, 'min': '1'}}},
             'rule.erc20.chainId'),
            ({'rule': {'all': [leaf, role(p, 'member')]}}, 'rule.all[1].role.entityID'),
            ({'rule': {'any': [level(p, 'lv1')]}}, 'rule.any[0].level.entityID'),
        ]
        for body, field in cases:
            with self.subTest(field=field, body=body):
                resp = self.req('POST', '/api/entities/%s/join-rules' % a, owner, body)
                self.assertEqual(resp[0], 400, resp)
                self.assertTrue(resp[2]['error']['field'].startswith(field), resp)
        # nothing was set by any of them
        self.assertEnvelope(self.req('GET', '/api/entities/%s/join-rules' % a, owner), 404,
                         'not_found')
        # its owner may name the private entity
        self.assertOk(self.set_rule(private_owner, self.entity(private_owner),
                                    role(p, 'owner')))

    # ---- checking ----

    def leaves(self, resp):
        return self.assertOk(resp)['data']

    def test_check_leaf_by_leaf(self):
        a, b, owner, admin, member, stranger = self.setup_pair()
        self.assertOk(self.set_rule(owner, a, {'all': [role(b, 'member'),
                                                       {'not': role(b, 'admin')}]}))
        d = self.leaves(self.check(member, a, member.address))
        self.assertIs(d['eligible'], True)
        self.assertEqual(d['blocks'], {})
        self.assertEqual(d['leaves'], [
            {'path': 'rule.all[0]', 'ok': True, 'have': 'member', 'need': 'member'},
            {'path': 'rule.all[1].not', 'ok': False, 'have': 'member', 'need': 'admin'}])
        d = self.leaves(self.check(admin, a, admin.address))
        self.assertIs(d['eligible'], False)  # an admin holds member too, and admin
        d = self.leaves(self.check(stranger, a, stranger.address))
        self.assertIs(d['eligible'], False)
        self.assertEqual(d['leaves'][0], {'path': 'rule.all[0]', 'ok': False, 'have': None,
                                          'need': 'member'})
        # a stranger may check only itself; owners and admins anyone
        self.assertEnvelope(self.check(stranger, a, member.address), 403, 'forbidden')
        self.assertIs(self.leaves(self.check(owner, a, member.address))['eligible'], True)
        self.assertEnvelope(self.check(member, a, 'nope'), 400, 'invalid_request', field='for')

    def test_combinators(self):
        a, b, owner, admin, member, stranger = self.setup_pair()
        cases = [
            ({'any': [role(b, 'owner'), role(b, 'admin')]}, {owner: True, admin: True,
                                                              member: False}),
            ({'atLeast': 2, 'of': [role(b, 'member'), role(b, 'admin'), role(b, 'owner')]},
             {owner: True, admin: True, member: False, stranger: False}),
            ({'not': role(b, 'member')}, {stranger: True, member: False}),
        ]
        for rule, want in cases:
            self.assertOk(self.set_rule(owner, a, rule))
            for w, eligible in want.items():
                with self.subTest(rule=rule, who=w.address):
                    d = self.leaves(self.check(owner, a, w.address))
                    self.assertIs(d['eligible'], eligible, d)
            time.sleep(1.6)  # past the check cache

    def test_level_leaf(self):
        a, b, owner, admin, member, stranger = self.setup_pair()
        sid = self.assertOk(self.req('POST', '/api/skills', owner, {
            'name': 'Skill', 'description': '', 'entityID': b}), 201)['data']['id']
        self.assertOk(self.req('POST', '/api/entities/%s/levels/lv1/update' % b, owner, {
            'name': 'One', 'description': '', 'skillIds': [], 'scores': [], 'endsAt': '',
            'XP': 5}), 201)
        self.assertOk(self.set_rule(owner, a, level(b, 'lv1')))
        d = self.leaves(self.check(owner, a, member.address))
        self.assertIs(d['eligible'], False)
        self.assertEqual(d['leaves'], [{'path': 'rule', 'ok': False, 'have': None,
                                        'need': 'lv1'}])
        self.assertOk(self.req('POST', '/api/entities/%s/contributions' % b, owner, {
            'contributions': [{'member': member.address, 'title': 'Work', 'xp': 7,
                               'skills': [{'skillId': sid, 'score': 1}]}]}), 201)
        time.sleep(1.6)  # past the check cache
        d = self.leaves(self.check(owner, a, member.address))
        self.assertIs(d['eligible'], True, d)
        self.assertTrue(d['leaves'][0]['have'].endswith('Z'), d)

    def test_leaf_on_entity_no_longer_readable_is_false(self):
        """The author's right to read the entity a leaf names is asked at every check: once it
        is gone (the author left the private entity), or the entity is, the leaf is false."""
        owner, author, member = [self.pool.pop() for _ in range(3)]
        p = self.entity(owner, public=False)
        self.force_add(owner, p, author, member)
        gone = self.entity(owner)
        self.force_add(owner, gone, member)
        a = self.entity(author)
        self.assertOk(self.set_rule(author, a, {'any': [role(p, 'member'),
                                                        role(gone, 'member')]}))
        d = self.leaves(self.check(author, a, member.address))
        self.assertEqual([x['ok'] for x in d['leaves']], [True, True])
        self.assertOk(self.req('POST', '/api/entities/%s/leave' % p, author, {}))
        self.assertOk(self.req('DELETE', '/api/entities/%s' % gone, owner))
        time.sleep(1.6)  # past the check cache
        d = self.leaves(self.check(author, a, member.address))
        self.assertIs(d['eligible'], False, d)
        self.assertEqual(d['leaves'], [
            {'path': 'rule.any[0]', 'ok': False, 'have': None, 'need': 'member'},
            {'path': 'rule.any[1]', 'ok': False, 'have': None, 'need': 'member'}])

    def test_check_is_cached(self):
        a, b, owner, admin, member, stranger = self.setup_pair()
        self.assertOk(self.set_rule(owner, a, role(b, 'member')))
        self.assertIs(self.leaves(self.check(stranger, a, stranger.address))['eligible'], False)
        self.force_add(owner, b, stranger)
        # kept for JOIN_CHECK_CACHE_MS: the same answer until then
        self.assertIs(self.leaves(self.check(stranger, a, stranger.address))['eligible'], False)
        deadline = time.time() + scaled(10)
        while time.time() < deadline:
            if self.leaves(self.check(stranger, a, stranger.address))['eligible']:
                break
            time.sleep(0.2)
        else:
            self.fail('the cached answer never expired')

    # ---- joining ----

    def test_join_via_and_events(self):
        a, b, owner, admin, member, stranger = self.setup_pair()
        self.assertEnvelope(self.join(member, a), 404, 'not_found')  # no rule
        self.assertOk(self.set_rule(owner, a, {'all': [role(b, 'member')]}))
        err = self.assertEnvelope(self.join(stranger, a), 403, 'forbidden')
        self.assertEqual(err['details'], [{'path': 'rule.all[0]', 'ok': False, 'have': None,
                                           'need': 'member'}])
        self.assertEqual(self.assertOk(self.join(member, a))['joined'], 1)
        self.assertEqual(self.assertOk(self.join(member, a))['joined'], 0)
        users = {u['address']: u for u in self.users(owner, a)}
        self.assertEqual(users[member.address]['via'], 'rules')
        self.assertEqual(users[member.address]['chain'], '')
        self.assertEqual(users[member.address]['addedBy'], member.address)
        due = float(self.cli('ZSCORE', ekey(a, ':join:due'), member.address))
        self.assertAlmostEqual(due / 1000, time.time() + 2, delta=scaled(5))
        self.assertIsNotNone(self.cli('ZSCORE', 'joins', a))
        joined = [e for e in self.events(owner, a) if e['type'] == 'member.joined']
        self.assertEqual([e['data'] for e in joined], [{'address': member.address}])
        self.assertEqual(joined[0]['actor'], member.address)
        # the wallet lists the entity
        listed = self.assertOk(self.req('GET', '/api/wallets/%s/entities' % member.address,
                                        member))
        self.assertIn(a, json.dumps(listed))

    def test_force_add_makes_manual_and_removals_clear(self):
        a, b, owner, admin, member, stranger = self.setup_pair()
        m2 = self.pool.pop()
        self.force_add(owner, b, m2)
        self.assertOk(self.set_rule(owner, a, role(b, 'member')))
        for w in (member, m2):
            self.assertEqual(self.assertOk(self.join(w, a))['joined'], 1)
        self.cli('HSET', ekey(a, ':join:failing'), member.address, '1', m2.address, '1')
        # a force-add of a rules member makes it manual, off the re-check
        self.assertEqual(self.force_add(owner, a, member)['existing'], 1)
        users = {u['address']: u for u in self.users(owner, a)}
        self.assertEqual(users[member.address]['via'], 'manual')
        self.assertEqual(users[member.address]['chain'], 'eth')
        self.assertEqual(users[m2.address]['via'], 'rules')
        self.assertIsNone(self.cli('ZSCORE', ekey(a, ':join:due'), member.address))
        self.assertEqual(self.cli('HEXISTS', ekey(a, ':join:failing'), member.address), 0)
        # leaving takes a rules member off too
        self.assertOk(self.req('POST', '/api/entities/%s/leave' % a, m2, {}))
        self.assertEqual(self.cli('ZCARD', ekey(a, ':join:due')), 0)
        self.assertEqual(self.cli('HLEN', ekey(a, ':join:failing')), 0)
        # as does a removal by the owners
        self.assertEqual(self.assertOk(self.join(m2, a))['joined'], 1)
        self.assertOk(self.req('DELETE', '/api/entities/%s/members/%s' % (a, m2.address), owner))
        self.assertEqual(self.cli('ZCARD', ekey(a, ':join:due')), 0)
        # deleting the rule keeps rules members, unlinks the re-check's keys
        self.assertEqual(self.assertOk(self.join(m2, a))['joined'], 1)
        self.assertOk(self.req('DELETE', '/api/entities/%s/join-rules' % a, owner))
        self.assertEqual(self.cli('EXISTS', ekey(a, ':join'), ekey(a, ':join:due')), 0)
        users = {u['address']: u for u in self.users(owner, a)}
        self.assertEqual(users[m2.address]['via'], 'rules')

    def test_join_respects_most_members(self):
        owner, member, other = [self.pool.pop() for _ in range(3)]
        b = self.entity(owner)
        self.force_add(owner, b, member, other)
        a = self.entity(owner)
        self.assertOk(self.set_rule(owner, a, role(b, 'member')))
        # the most members is a process setting: a second process with 1 shares the Redis
        svc = self.entityd(redis=self.r, env={'RATE_WRITES_PER_MINUTE': '0',
                                              'MAX_MEMBERS_PER_ENTITY': '1'})
        signer = harness.Signer(harness.current_message(svc.port)[0])

        def join(w):
            return harness.request(svc.port, 'POST', '/api/entities/%s/join?%s' % (
                a, signer.query(w)), body={}, timeout=scaled(10))
        self.assertEqual(self.assertOk(join(member))['joined'], 1)
        resp = join(other)
        self.assertNotEqual(resp[0], 200, resp)
        self.assertEqual(len(self.users(owner, a)), 1)


CHAIN = 1337
RPC_TIMEOUT_MS = 1500


class JoinRulesChainTest(harness.ServiceTestCase):
    """Token and native leaves through the routes, read from a real chain."""

    @classmethod
    def setUpClass(cls):
        if not harness.chain_available():
            raise harness.unittest.SkipTest('tests/node has no ganache or solc')
        cls.chain = harness.JoinChain()
        cls.proxy = cls.chain.proxy()
        cls.pool = harness.Wallet.random(30)
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env={
            'RATE_WRITES_PER_MINUTE': '0', 'JOIN_CHECK_CACHE_MS': '0',
            'ETH_RPC_URLS': '%d=%s' % (CHAIN, harness.proxy_url(cls.proxy)),
            'MULTICALL3_ADDRESS': cls.chain.multicall,
            'ETH_RPC_TIMEOUT_MS': str(RPC_TIMEOUT_MS), 'JOIN_RPC_MAX_PER_SECOND': '1000'})
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.chain.stop()

    req = JoinRulesTest.req
    entity = JoinRulesTest.entity
    set_rule = JoinRulesTest.set_rule
    check = JoinRulesTest.check
    join = JoinRulesTest.join
    users = JoinRulesTest.users

    def setup_rule(self, rule):
        owner, holder, other = [self.pool.pop() for _ in range(3)]
        a = self.entity(owner)
        got = self.assertOk(self.set_rule(owner, a, rule))['data']
        self.assertEqual(got['rule'], rule)
        return a, owner, holder, other

    def leaf(self, owner, a, w):
        d = self.assertOk(self.check(owner, a, w.address))['data']
        self.assertEqual(len(d['leaves']), 1, d)
        return d['eligible'], d['leaves'][0], d['blocks']

    def assert_leaf_kind(self, rule, give, have_yes, have_no, need):
        a, owner, holder, other = self.setup_rule(rule)
        give(holder.address)
        block = self.chain.block()
        ok, leaf, blocks = self.leaf(owner, a, holder)
        self.assertIs(ok, True, leaf)
        self.assertEqual(leaf, {'path': 'rule', 'ok': True, 'have': have_yes, 'need': need})
        self.assertEqual(blocks, {str(CHAIN): block})
        ok, leaf, _ = self.leaf(owner, a, other)
        self.assertIs(ok, False, leaf)
        self.assertEqual(leaf, {'path': 'rule', 'ok': False, 'have': have_no, 'need': need})
        # joining by it: the holder joins, the other is refused with the leaf
        self.assertEqual(self.assertOk(self.join(holder, a))['joined'], 1)
        err = self.assertEnvelope(self.join(other, a), 403, 'forbidden')
        self.assertEqual(err['details'], [leaf])
        via = {u['address']: u['via'] for u in self.users(owner, a)}
        self.assertEqual(via[holder.address], 'rules')
        self.assertNotIn(other.address, via)

    def test_erc20_leaf(self):
        c = self.chain
        self.assert_leaf_kind({'erc20': {'chainId': CHAIN, 'contract': c.erc20, 'min': '50'}},
                              lambda addr: c.mint('erc20', addr, amount=60), '60', '0', '50')

    def test_erc721_leaf_any_token(self):
        c = self.chain
        self.assert_leaf_kind({'erc721': {'chainId': CHAIN, 'contract': c.erc721}},
                              lambda addr: c.mint('erc721', addr, token_id=7001), '1', '0', '1')

    def test_erc721_leaf_one_token(self):
        c = self.chain
        self.assert_leaf_kind({'erc721': {'chainId': CHAIN, 'contract': c.erc721,
                                          'tokenId': '7101'}},
                              lambda addr: c.mint('erc721', addr, token_id=7101), '1', '0', '1')

    def test_erc1155_leaf(self):
        c = self.chain
        self.assert_leaf_kind({'erc1155': {'chainId': CHAIN, 'contract': c.erc1155,
                                           'tokenId': '9', 'min': '2'}},
                              lambda addr: c.mint('erc1155', addr, token_id=9, amount=2), '2',
                              '0', '2')

    def test_native_leaf(self):
        c = self.chain
        self.assert_leaf_kind({'native': {'chainId': CHAIN, 'min': str(10 ** 18)}},
                              lambda addr: c.set_balance(addr, 10 ** 18), str(10 ** 18), '0',
                              str(10 ** 18))

    def test_chain_without_url_refused(self):
        owner = self.pool.pop()
        a = self.entity(owner)
        resp = self.set_rule(owner, a, {'any': [
            {'native': {'chainId': CHAIN, 'min': '1'}},
            {'native': {'chainId': 999, 'min': '1'}}]})
        self.assertEqual(resp[0], 400, resp)
        self.assertTrue(resp[2]['error']['field'].startswith('rule.any[1].native'), resp)

    def test_stalled_chain_is_503(self):
        c = self.chain
        a, owner, holder, other = self.setup_rule(
            {'erc20': {'chainId': CHAIN, 'contract': c.erc20, 'min': '1'}})
        c.mint('erc20', holder.address, amount=1)
        self.proxy.stall()
        try:
            t0 = time.monotonic()
            st, headers, body = self.join(holder, a)
            self.assertEqual(st, 503, body)
            self.assertEqual(body['error']['code'], 'unavailable')
            self.assertGreaterEqual(int(headers.get('retry-after', '0')), 1)
            self.assertLess(time.monotonic() - t0, RPC_TIMEOUT_MS / 1000.0 + scaled(5))
            # the check answers, the rule erring: eligible null, the leaf's error
            d = self.assertOk(self.check(owner, a, holder.address))['data']
            self.assertIsNone(d['eligible'])
            self.assertEqual(set(d['leaves'][0]), {'path', 'error'})
        finally:
            self.proxy.release()
        self.assertEqual(self.users(owner, a), [])
        self.assertEqual(self.assertOk(self.join(holder, a))['joined'], 1)


if __name__ == '__main__':
    harness.main()
