"""Finding entities (CONTRACT §9): by alias, a wallet's entities, the directory; visibility,
role filters, cursors under churn, index entries without the role (a write that died after its
index add), and the backfill of entities an earlier release stored (killed half-way, resumed by
another instance)."""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
from test_entities import (Caller, EntityCase, commandstats, ekey, rand_addr,  # noqa: E402
                           rand_tag, rcli, sign_wallets, stats_delta)

SUMMARY_FIELDS = {'id', 'name', 'description', 'imageURL', 'communityURLAlias', 'public',
                  'isEnabled'}


def tick():
    """Since and createdAt have milliseconds: writes whose order a test checks go one apart."""
    time.sleep(0.003)


def wallet_keys(addr):
    return ['wallet:{%s}:%s' % (addr, s) for s in ('meta', 'any', 'owner', 'admin', 'member')]


DIR_KEYS = ['dir:{entities}:meta', 'dir:{entities}:created', 'dir:{entities}:names']


class FindCase(EntityCase):
    ROLES = ('owner', 'owner2', 'admin', 'member', 'stranger', 'platform', 'solo')
    ENV = {}

    @classmethod
    def start(cls):
        cls.r = cls.class_redis()
        wallets = harness.Wallet.random(len(cls.ROLES))
        env = {'PLATFORM_ADMINS': wallets[cls.ROLES.index('platform')].address,
               'FIND_REPAIR_GRACE_MS': '1500'}
        env.update(cls.ENV)
        cls.svc = cls.class_entityd(redis=cls.r, env=env)
        cls.port = cls.svc.port
        message, _ = harness.current_message(cls.port)
        sigs = sign_wallets(wallets, message)
        cls.c = {role: Caller(w, sigs[w.address], role) for role, w in zip(cls.ROLES, wallets)}

    # --- requests ---

    def by_alias(self, alias, caller, signed=True, port=None):
        return self.req('GET', '/api/entities/by-alias/%s?%s' %
                        (alias, caller.q if signed else caller.aq), port=port)

    def wallet(self, addr, caller, extra='', port=None):
        return self.req('GET', '/api/wallets/%s/entities?%s%s' % (addr, caller.q, extra),
                        port=port)

    def directory(self, caller, extra='', signed=False, port=None):
        return self.req('GET', '/api/entities?%s%s' % (caller.q if signed else caller.aq, extra),
                        port=port)

    def wallet_all(self, addr, caller, limit=100, extra='', port=None):
        items, cursor, pages = [], None, 0
        while True:
            pages += 1
            self.assertLess(pages, 500)
            q = '&limit=%d%s' % (limit, extra) + ('&cursor=' + cursor if cursor else '')
            body = self.assertOk(self.wallet(addr, caller, q, port=port))
            self.assertLessEqual(len(body['data']), limit)
            items += body['data']
            cursor = body['nextCursor']
            if not cursor:
                return items

    def dir_all(self, caller, limit=100, extra='', port=None):
        items, cursor, pages = [], None, 0
        while True:
            pages += 1
            self.assertLess(pages, 2000)
            q = '&limit=%d%s' % (limit, extra) + ('&cursor=' + cursor if cursor else '')
            body = self.assertOk(self.directory(caller, q, port=port))
            items += body['data']
            cursor = body['nextCursor']
            if not cursor:
                return items

    def ids(self, items):
        return [i['entity']['id'] if 'entity' in i else i['id'] for i in items]

    def disable(self, eid, owners):
        self.assertOk(self.update(self.c['platform'], eid, owners, isEnabled=False))


class FindTest(FindCase):

    @classmethod
    def setUpClass(cls):
        cls.start()

    # --- by alias ---

    def test_by_alias_is_op1(self):
        c = self.c
        alias = 'find-' + rand_tag()
        ent = self.create(c['owner'], communityURLAlias=alias)
        for who, signed in ((c['stranger'], False), (c['stranger'], True), (c['owner'], True)):
            a = self.by_alias(alias, who, signed)
            b = self.get_entity(ent['id'], who, signed)
            self.assertEqual(a[0], 200)
            self.assertEqual(a[2], b[2])
        self.assertError(self.by_alias('no-such-' + rand_tag(), c['owner']), 404, 'not_found')
        self.assertError(self.by_alias('UPPER', c['owner']), 404, 'not_found')
        self.assertError(self.by_alias('ab', c['owner']), 404, 'not_found')
        # private: the read rule of op 1
        self.assertOk(self.update(c['owner'], ent['id'], [c['owner'].address], public=False))
        self.assertError(self.by_alias(alias, c['stranger']), 403, 'forbidden')
        self.assertError(self.by_alias(alias, c['stranger'], signed=False), 401,
                         'unauthenticated')
        self.assertOk(self.by_alias(alias, c['owner']))
        # disabled: 404 to a stranger, readable by its owner
        self.assertOk(self.update(c['owner'], ent['id'], [c['owner'].address], public=True))
        self.disable(ent['id'], [c['owner'].address])
        self.assertError(self.by_alias(alias, c['stranger']), 404, 'not_found')
        self.assertOk(self.by_alias(alias, c['owner']))

    def test_by_alias_moves_and_stale_claims(self):
        c = self.c
        alias, alias2 = 'find-' + rand_tag(), 'find-' + rand_tag()
        ent = self.create(c['owner'], communityURLAlias=alias)
        self.assertOk(self.update(c['owner'], ent['id'], [c['owner'].address],
                                  communityURLAlias=alias2))
        self.assertError(self.by_alias(alias, c['owner']), 404, 'not_found')
        self.assertEqual(self.assertOk(self.by_alias(alias2, c['owner']))['data']['id'],
                         ent['id'])
        # a claim whose write never happened (the entity names another alias): 404, and a
        # claim naming an entity that does not exist: 404
        stale = 'find-' + rand_tag()
        rcli(self.r, 'SET', 'alias:{%s}' % stale, '%s 1 0123456789abcdef' % ent['id'])
        self.assertError(self.by_alias(stale, c['owner']), 404, 'not_found')
        rcli(self.r, 'SET', 'alias:{%s}' % stale, 'c-00000000-0000-4000-8000-000000000000 1 x')
        self.assertError(self.by_alias(stale, c['owner']), 404, 'not_found')
        # aliases that read like the entity routes' last segment
        for word in ('users', 'admins', 'events'):
            other = self.create(c['owner'])
            r = self.update(c['owner'], other['id'], [c['owner'].address],
                            communityURLAlias=word)
            if r[0] == 409:
                continue
            self.assertOk(r)
            self.assertEqual(self.assertOk(self.by_alias(word, c['owner']))['data']['id'],
                             other['id'])

    # --- a wallet's entities ---

    def test_wallet_roles_order_and_filters(self):
        c = self.c
        w = harness.Wallet.random(1)[0]
        me = Caller(w, sign_wallets([w], harness.current_message(self.port)[0])[w.address], 'me')
        e1 = self.create(c['owner'], owners=[c['owner'].address, me.address])['id']
        tick()
        e2 = self.create(c['owner'])['id']
        self.assertOk(self.admins_post(e2, c['owner'], [me.address]))
        tick()
        e3 = self.create(c['owner'])['id']
        self.assertOk(self.force_add(e3, c['owner'], [me.address]))
        tick()
        e4 = self.create(me)['id']  # owner (creator)
        self.assertOk(self.admins_post(e4, me, [me.address]))
        self.assertOk(self.force_add(e4, me, [me.address]))
        items = self.wallet_all(me.address, me, limit=2)
        self.assertEqual(self.ids(items), [e4, e3, e2, e1])
        roles = {i['entity']['id']: i['roles'] for i in items}
        self.assertEqual(roles, {e1: ['owner'], e2: ['admin'], e3: ['member'],
                                 e4: ['owner', 'admin', 'member']})
        for i in items:
            self.assertEqual(set(i), {'entity', 'roles', 'since'})
            self.assertEqual(set(i['entity']), SUMMARY_FIELDS)
        sinces = [i['since'] for i in items]
        self.assertEqual(sinces, sorted(sinces, reverse=True))
        got = self.assertOk(self.get_entity(e2, me))['data']
        summary = [i['entity'] for i in items if i['entity']['id'] == e2][0]
        self.assertEqual(summary, {k: got[k] for k in SUMMARY_FIELDS})
        self.assertEqual(self.ids(self.wallet_all(me.address, me, extra='&role=owner')), [e4, e1])
        self.assertEqual(self.ids(self.wallet_all(me.address, me, extra='&role=admin')), [e4, e2])
        self.assertEqual(self.ids(self.wallet_all(me.address, me, extra='&role=member')),
                         [e4, e3])
        # since: the first role, not a later one
        first = [i['since'] for i in items if i['entity']['id'] == e2][0]
        self.assertOk(self.force_add(e2, c['owner'], [me.address]))
        again = self.wallet_all(me.address, me)
        self.assertEqual([i['since'] for i in again if i['entity']['id'] == e2], [first])
        self.assertEqual([i['roles'] for i in again if i['entity']['id'] == e2],
                         [['admin', 'member']])

    def test_wallet_bad_requests(self):
        c = self.c
        a = c['owner'].address
        self.assertError(self.req('GET', '/api/wallets/%s/entities?%s' % (a, c['owner'].aq)),
                         401, 'unauthenticated')
        for extra, field in (('&limit=0', 'limit'), ('&limit=101', 'limit'),
                             ('&limit=x', 'limit'), ('&role=boss', 'role'),
                             ('&cursor=zz', 'cursor'), ('&cursor=00', 'cursor')):
            self.assertError(self.wallet(a, c['owner'], extra), 400, 'invalid_request', field)
        self.assertError(self.wallet('0x123', c['owner']), 404, 'not_found')
        empty = self.assertOk(self.wallet(rand_addr(), c['owner']))
        self.assertEqual((empty['data'], empty['nextCursor']), ([], None))
        for extra, field in (('&limit=0', 'limit'), ('&q=a', 'q'), ('&q=' + 'a' * 101, 'q'),
                             ('&q=%20a%20', 'q'), ('&cursor=0g', 'cursor')):
            self.assertError(self.directory(c['owner'], extra), 400, 'invalid_request', field)

    def test_visibility(self):
        # A stranger never sees a private or disabled entity's id in any list; the wallet itself
        # and platform admins see them.
        c = self.c
        w = harness.Wallet.random(1)[0]
        me = Caller(w, sign_wallets([w], harness.current_message(self.port)[0])[w.address], 'me')
        pub = self.create(me)['id']
        priv = self.create(me, public=False)['id']
        dis = self.create(me)['id']
        self.disable(dis, [me.address])
        mem_priv = self.create(c['owner'], public=False)['id']
        self.assertOk(self.force_add(mem_priv, c['owner'], [me.address]))
        hidden = {priv, dis, mem_priv}
        for who in (me, c['platform']):
            self.assertEqual(set(self.ids(self.wallet_all(me.address, who))),
                             {pub, priv, dis, mem_priv})
        for who in (c['stranger'], c['owner']):
            for extra in ('', '&role=owner', '&role=member', '&role=admin'):
                for limit in (1, 2, 100):
                    cursor, pages = None, 0
                    while pages < 20:
                        pages += 1
                        q = '&limit=%d%s' % (limit, extra) + ('&cursor=' + cursor if cursor
                                                              else '')
                        st, _, body = self.wallet(me.address, who, q)
                        self.assertEqual(st, 200)
                        raw = json.dumps(body)
                        for h in hidden:
                            self.assertNotIn(h, raw)
                            self.assertNotIn(h.encode().hex(), raw)
                        cursor = body['nextCursor']
                        if not cursor:
                            break
            self.assertEqual(self.ids(self.wallet_all(me.address, who)), [pub])
        # the directory: public and enabled only, signed or not
        for who, signed in ((c['stranger'], False), (me, True), (c['platform'], True)):
            raw = json.dumps(self.dir_all(who, limit=100))
            self.assertIn(pub, raw)
            for h in hidden:
                self.assertNotIn(h, raw)
        # made public and enabled again: shown at once
        self.assertOk(self.update(me, priv, [me.address], public=True))
        self.assertOk(self.update(c['platform'], dis, [me.address], isEnabled=True))
        self.assertEqual(set(self.ids(self.wallet_all(me.address, c['stranger']))),
                         {pub, priv, dis})
        self.assertTrue({pub, priv, dis} <= set(self.ids(self.dir_all(c['stranger']))))

    def test_removed_roles_never_shown(self):
        # admins removed and owners replaced: gone from the lists at once, also with the index
        # entries left behind (their drop skipped as too recent, or never sent)
        c = self.c
        w = harness.Wallet.random(2)
        sigs = sign_wallets(w, harness.current_message(self.port)[0])
        a, b = (Caller(x, sigs[x.address], 'x') for x in w)
        e1 = self.create(c['owner'])['id']
        self.assertOk(self.admins_post(e1, c['owner'], [a.address]))
        tick()
        e2 = self.create(c['owner'], owners=[c['owner'].address, a.address])['id']
        self.assertEqual(self.ids(self.wallet_all(a.address, a)), [e2, e1])
        self.assertOk(self.admins_delete(e1, c['owner'], a.address))
        self.assertEqual(self.ids(self.wallet_all(a.address, a)), [e2])
        self.assertEqual(self.ids(self.wallet_all(a.address, a, extra='&role=admin')), [])
        self.assertOk(self.update(c['owner'], e2, [c['owner'].address, b.address]))
        self.assertEqual(self.ids(self.wallet_all(a.address, a)), [])
        self.assertEqual(self.ids(self.wallet_all(b.address, b)), [e2])
        self.assertEqual(self.wallet_all(b.address, b)[0]['roles'], ['owner'])
        # an index entry without the role (its write died after the index add): never shown,
        # and dropped by a read once the grace period has passed
        ghost = self.create(c['owner'])['id']
        rcli(self.r, 'EVAL', "redis.call('HSET', KEYS[1], ARGV[1], '0000001000000000 0');"
             "redis.call('ZADD', KEYS[2], 0, '0000001000000000:' .. ARGV[1]);"
             "redis.call('ZADD', KEYS[5], 0, '0000001000000000:' .. ARGV[1])", '5',
             *wallet_keys(a.address), ghost)
        self.assertEqual(self.ids(self.wallet_all(a.address, a)), [])
        self.assertEqual(self.ids(self.wallet_all(a.address, a, extra='&role=member')), [])
        harness.wait_for(lambda: (self.wallet_all(a.address, a) == [] and
                                  int(rcli(self.r, 'ZCARD', wallet_keys(a.address)[1])) == 0),
                         scaled(10), what='the ghost entry dropped')

    def test_removed_and_leaving_members_never_shown_and_dropped(self):
        # CONTRACT §8 feeds §9: a member removed, or leaving, is gone from its wallet's list at
        # once, and the removal's own drop (remove-after) clears its member entries with no read
        c = self.c
        w = harness.Wallet.random(2)
        sigs = sign_wallets(w, harness.current_message(self.port)[0])
        a, b = (Caller(x, sigs[x.address], 'x') for x in w)
        eid = self.create(c['owner'])['id']
        self.assertOk(self.force_add(eid, c['owner'], [a.address, b.address]))
        for x in (a, b):
            self.assertEqual(self.wallet_all(x.address, x)[0]['roles'], ['member'])
        time.sleep(1.6)  # past FIND_REPAIR_GRACE_MS (1500): a drop may now take the entries
        self.assertOk(self.req('DELETE', '/api/entities/%s/members/%s?%s' % (
            eid, a.address, c['owner'].q)))
        self.assertOk(self.req('POST', '/api/entities/%s/leave?%s' % (eid, b.q)))
        for x in (a, b):
            keys = wallet_keys(x.address.lower())
            # the member role's entries (the wallet's "any" entry is a read's to repair: the
            # removal does not know whether the wallet holds another role there)
            harness.wait_for(lambda: int(rcli(self.r, 'ZCARD', keys[4])) == 0,
                             scaled(10), what='the removal dropping the member entries')
            self.assertEqual(self.wallet_all(x.address, x), [])
        # added again: listed again
        self.assertOk(self.force_add(eid, c['owner'], [a.address]))
        self.assertEqual(self.ids(self.wallet_all(a.address, a, extra='&role=member')), [eid])

    def test_pages_refill_past_dropped_entries(self):
        # 30 entries the entities no longer bear out between the visible ones: pages stay full
        c = self.c
        w = harness.Wallet.random(1)[0]
        me = Caller(w, sign_wallets([w], harness.current_message(self.port)[0])[w.address], 'me')
        keep = []
        for i in range(5):
            e = self.create(c['owner'])['id']
            self.assertOk(self.force_add(e, c['owner'], [me.address]))
            keep.append(e)
            tick()
            for _ in range(6):
                g = self.create(c['owner'])['id']
                self.assertOk(self.admins_post(g, c['owner'], [me.address]))
                self.assertOk(self.admins_delete(g, c['owner'], me.address))
            # their entries stay (the drop is skipped within the grace period): re-add them
            # bare, as a write that died after its index add leaves them
        keys = wallet_keys(me.address)
        n = int(rcli(self.r, 'ZCARD', keys[1]))
        self.assertGreaterEqual(n, 5)
        for limit in (1, 2, 3):
            got = self.wallet_all(me.address, me, limit=limit)
            self.assertEqual(self.ids(got), keep[::-1])

    def test_cursors_under_churn(self):
        # Pages neither repeat nor skip while entities are created and roles removed: every
        # entity the wallet holds throughout appears exactly once.
        c = self.c
        w = harness.Wallet.random(1)[0]
        me = Caller(w, sign_wallets([w], harness.current_message(self.port)[0])[w.address], 'me')
        stable, churn = [], []
        for i in range(24):
            e = self.create(c['owner'])['id']
            self.assertOk(self.admins_post(e, c['owner'], [me.address]))
            (stable if i % 2 else churn).append(e)
        stop = threading.Event()
        errors = []

        def writer():
            k = 0
            try:
                while not stop.is_set() and k < 200:
                    if k < len(churn):
                        self.assertOk(self.admins_delete(churn[k], c['owner'], me.address))
                    else:
                        e = self.create(c['owner'])['id']
                        self.assertOk(self.admins_post(e, c['owner'], [me.address]))
                    k += 1
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

        t = threading.Thread(target=writer)
        t.start()
        try:
            for limit in (1, 3, 7):
                for role in ('', '&role=admin'):
                    seen = self.ids(self.wallet_all(me.address, me, limit=limit, extra=role))
                    self.assertEqual(len(seen), len(set(seen)), 'a page repeated an entity')
                    self.assertTrue(set(stable) <= set(seen), 'a page skipped an entity')
        finally:
            stop.set()
            t.join(scaled(60))
        self.assertEqual(errors, [])

    # --- the directory ---

    def test_directory_order_search_and_counts(self):
        c = self.c
        tag = rand_tag()
        names = ['  %s Beta' % tag, '%s alpha' % tag.upper(), '%s ALPHA' % tag, '%s gamma' % tag]
        ents = []
        for n in names:
            ents.append(self.create(c['owner'], name=n)['id'])
            time.sleep(0.003)  # createdAt has milliseconds: one apart
        self.assertOk(self.force_add(ents[0], c['owner'], [rand_addr() for _ in range(3)]))
        got = self.dir_all(c['stranger'], limit=2)
        pos = [self.ids(got).index(e) for e in ents]
        self.assertEqual(pos, sorted(pos, reverse=True), 'newest first')
        for i in got:
            self.assertEqual(set(i), SUMMARY_FIELDS | {'memberCount'})
        by_id = {i['id']: i for i in got}
        self.assertEqual(by_id[ents[0]]['memberCount'], 3)
        self.assertEqual(by_id[ents[1]]['memberCount'], 0)
        # prefix: trimmed, ASCII case-insensitive; by folded name, then id
        found = self.dir_all(c['stranger'], limit=1, extra='&q=%20' + tag.upper() + '%20A')
        alphas = sorted([ents[1], ents[2]])
        self.assertEqual(self.ids(found), alphas)
        found = self.dir_all(c['stranger'], limit=2, extra='&q=' + tag)
        self.assertEqual(self.ids(found), alphas + [ents[0], ents[3]])
        # a rename shows at once; the old name finds nothing
        self.assertOk(self.update(c['owner'], ents[3], [c['owner'].address], name=tag + ' delta'))
        self.assertEqual(self.ids(self.dir_all(c['stranger'], extra='&q=%s%%20g' % tag)), [])
        self.assertEqual(self.ids(self.dir_all(c['stranger'], extra='&q=%s%%20d' % tag)),
                         [ents[3]])
        # private: gone from the directory and its search
        self.assertOk(self.update(c['owner'], ents[3], [c['owner'].address],
                                  name=tag + ' delta', public=False))
        self.assertEqual(self.ids(self.dir_all(c['stranger'], extra='&q=%s%%20d' % tag)), [])
        self.assertNotIn(ents[3], self.ids(self.dir_all(c['stranger'])))


    # --- the page cache (FIND_CACHE_MB) ---

    def cached_instance(self, **env):
        """Another entityd on this Redis (the class's settings, a short repair grace so that
        pages with entries to repair are kept again soon), past its start-up backfill check."""
        e = {'PLATFORM_ADMINS': self.c['platform'].address, 'FIND_REPAIR_GRACE_MS': '300'}
        e.update(env)
        svc = self.entityd(redis=self.r, env=e)
        harness.wait_for(lambda: b'entityd_find_backfill_done 1' in
                         harness.request(svc.port, 'GET', '/metrics')[2], scaled(20),
                         what='the new instance past its backfill check')
        return svc

    def page_cache(self, port):
        """{outcome: count} of entityd_find_page_cache_total."""
        out = {}
        for line in harness.request(port, 'GET', '/metrics')[2].decode().splitlines():
            if line.startswith('entityd_find_page_cache_total{'):
                k, v = line.rsplit(' ', 1)
                out[k.split('"')[1]] = int(float(v))
        return out

    def views(self, me, tag):
        """The pages the changes below move: a wallet's list as itself, as a stranger and by
        role, the directory's first page and its search by the test's tag."""
        c = self.c
        return [
            ('wallet', lambda p: self.wallet(me.address, me, '&limit=100', port=p)),
            ('wallet as a stranger',
             lambda p: self.wallet(me.address, c['stranger'], '&limit=100', port=p)),
            ('wallet members', lambda p: self.wallet(me.address, me, '&limit=100&role=member',
                                                     port=p)),
            ('wallet admins', lambda p: self.wallet(me.address, me, '&limit=100&role=admin',
                                                    port=p)),
            ('directory', lambda p: self.directory(c['stranger'], '&limit=20', port=p)),
            ('search', lambda p: self.directory(c['stranger'], '&limit=100&q=' + tag, port=p)),
        ]

    def keep_all(self, views, port):
        """Reads every view until each one is answered from the page cache (a page is not kept
        while an entry of it is due a repair, which waits for the grace period)."""
        def all_kept():
            before = self.page_cache(port).get('hit', 0)
            for _, fn in views:
                self.assertOk(fn(port))
            return self.page_cache(port).get('hit', 0) - before == len(views)
        harness.wait_for(all_kept, scaled(15), interval=0.05, what='every page kept')

    def test_repeated_pages_cost_redis_nothing(self):
        c = self.c
        svc = self.cached_instance()
        w = harness.Wallet.random(1)[0]
        me = Caller(w, sign_wallets([w], harness.current_message(self.port)[0])[w.address], 'me')
        tag = rand_tag()
        for i in range(3):
            self.create(me, name='%s page %d' % (tag, i), port=svc.port)
        mine = self.create(c['owner'], name='%s page x' % tag)['id']
        self.assertOk(self.force_add(mine, c['owner'], [me.address]))
        views = self.views(me, tag) + [
            ('wallet, two a page', lambda p: self.wallet(me.address, me, '&limit=2', port=p)),
            ('search, signed', lambda p: self.directory(me, '&limit=2&q=' + tag, signed=True,
                                                        port=p))]
        self.keep_all(views, svc.port)
        first = [self.assertOk(fn(svc.port)) for _, fn in views]
        # Commands other than the requests' (heartbeats, sentinels, replicas, the cluster's
        # slot map) are left out; a repeated page costs no other: tried a few times, since a
        # test before may have left work running (an erasure, a repair).
        upkeep = {'info', 'publish', 'ping', 'cluster|slots', 'replconf', 'role',
                  'client|setname', 'subscribe', 'hello'}
        nodes = self.r.live() if hasattr(self.r, 'live') else [self.r]

        def stats():
            out = {}
            for n in nodes:
                for k, v in commandstats(n).items():
                    out[k] = out.get(k, 0) + v
            return out
        costs = []
        for _ in range(3):
            hits = self.page_cache(svc.port)['hit']
            before = stats()
            again = [self.assertOk(fn(svc.port)) for _, fn in views]
            d = {k: v for k, v in stats_delta(before, stats()).items() if k not in upkeep}
            self.assertEqual(again, first)
            self.assertEqual(self.page_cache(svc.port)['hit'], hits + len(views))
            costs.append(d)
            if not d:
                break
        self.assertEqual(costs[-1], {}, costs)

    def test_revoked_signature_refused_on_kept_pages(self):
        # A kept page needs no read, but the signature's revocation check still runs: revoked
        # through this instance, refused at once; through another, once Redis's message
        # arrives.
        svc, other = self.cached_instance(), self.cached_instance()
        w = harness.Wallet.random(2)
        sigs = sign_wallets(w, harness.current_message(self.port)[0])
        for x, via in ((w[0], svc), (w[1], other)):
            me = Caller(x, sigs[x.address], 'me')
            self.create(me, port=svc.port)
            views = [('wallet', lambda p: self.wallet(me.address, me, port=p)),
                     ('directory, signed', lambda p: self.directory(me, signed=True, port=p))]
            self.keep_all(views, svc.port)
            st, _, body = self.req('POST', '/api/auth/revoke?' + me.q, port=via.port)
            self.assertEqual(st, 200, body)
            for name, fn in views:
                if via is not svc:
                    harness.wait_for(lambda: fn(svc.port)[0] == 401, scaled(2), interval=0.01,
                                     what='%s refused after the revocation' % name)
                self.assertError(fn(svc.port), 401, 'unauthenticated')
            # the same directory page unsigned: still answered
            self.assertOk(self.directory(me, port=svc.port))

    def change_pages(self, writer):
        """Every change that moves a page, written through `writer` ('this': the instance
        read, 'other': another instance, 'redis': straight into Redis), moves the next answer
        of the instance that kept the page: each page is kept, the change made, and the page
        read again must be what an instance without caches reads, and differ from before."""
        c = self.c
        a = self.cached_instance()
        b = self.cached_instance() if writer == 'other' else a
        fresh = self.cached_instance(READ_CACHE_MB='0', FIND_CACHE_MB='0')
        off = self.cached_instance(FIND_CACHE_MB='0')  # the read cache alone
        wp = b.port
        w = harness.Wallet.random(1)[0]
        me = Caller(w, sign_wallets([w], harness.current_message(self.port)[0])[w.address], 'me')
        tag = rand_tag()
        own = [c['owner'].address]
        names = {}

        def make(caller, name, owners):
            e = self.create(caller, owners=owners, name='%s %s' % (tag, name), port=wp)['id']
            names[e] = '%s %s' % (tag, name)
            return e
        e1 = make(me, 'alpha', [me.address])
        e2 = make(c['owner'], 'beta', own)
        e3 = make(c['owner'], 'gamma', own)
        self.assertOk(self.req('POST', '/api/entities/%s/admins?%s' % (e2, c['owner'].q),
                               {'addresses': [me.address]}, port=wp))
        self.assertOk(self.force_add(e3, c['owner'], [me.address], port=wp))
        views = self.views(me, tag)

        def put(caller, eid, owners, **kw):
            kw.setdefault('name', names[eid])
            kw.setdefault('public', True)
            self.assertOk(self.update(caller, eid, owners, port=wp, **kw))
            names[eid] = kw['name']

        def raw(*args):
            rcli(self.r, *args)

        if writer == 'redis':
            changes = [
                ('renamed', lambda: raw('HSET', ekey(e1), 'name', tag + ' raw')),
                ('made private', lambda: raw('HSET', ekey(e1), 'public', '0')),
                ('public again', lambda: raw('HSET', ekey(e1), 'public', '1')),
                ('disabled', lambda: raw('HSET', ekey(e2), 'isEnabled', '0')),
                ('enabled again', lambda: raw('HSET', ekey(e2), 'isEnabled', '1')),
                ('a member counted', lambda: raw('HSET', ekey(e2, ':members'), rand_addr(), 'x')),
                ('a member removed', lambda: raw('HDEL', ekey(e3, ':members'), me.address)),
                ('an admin removed', lambda: raw('SREM', ekey(e2, ':admins'), me.address)),
                ('an alias set', lambda: raw('HSET', ekey(e1), 'communityURLAlias', 'r' + tag)),
                ('deleted', lambda: raw('DEL', ekey(e1))),
            ]
        else:
            def delete(path, caller):
                self.assertOk(self.req('DELETE', path + '?' + caller.q, port=wp))
            changes = [
                ('renamed', lambda: put(me, e1, [me.address], name=tag + ' omega')),
                ('made private', lambda: put(me, e1, [me.address], public=False)),
                ('public again', lambda: put(me, e1, [me.address])),
                ('disabled', lambda: put(c['platform'], e2, own, isEnabled=False)),
                ('enabled again', lambda: put(c['platform'], e2, own, isEnabled=True)),
                ('a member added', lambda: self.assertOk(
                    self.force_add(e2, c['owner'], [me.address], port=wp))),
                ('a member removed', lambda: delete(
                    '/api/entities/%s/members/%s' % (e3, me.address), c['owner'])),
                ('an admin added', lambda: self.assertOk(self.req(
                    'POST', '/api/entities/%s/admins?%s' % (e3, c['owner'].q),
                    {'addresses': [me.address]}, port=wp))),
                ('an admin removed', lambda: delete(
                    '/api/entities/%s/admins/%s' % (e2, me.address), c['owner'])),
                ('a new entity', lambda: make(c['owner'], 'delta', own)),
                ('an alias claimed', lambda: put(me, e1, [me.address],
                                                 communityURLAlias='f' + tag)),
                ('deleted', lambda: delete('/api/entities/%s' % e1, me)),
            ]
        for what, change in changes:
            self.keep_all(views, a.port)
            old = [self.assertOk(fn(fresh.port))['data'] for _, fn in views]
            change()
            new = [self.assertOk(fn(fresh.port))['data'] for _, fn in views]
            self.assertNotEqual(new, old, '%s moves no page: the test would prove nothing' % what)
            for port in (a.port, off.port):
                if port == wp:  # the instance written through: at once
                    got = [self.assertOk(fn(port))['data'] for _, fn in views]
                else:
                    # written elsewhere: heard through Redis's invalidation message, which
                    # races the next request by microseconds
                    def same():
                        got[:] = [self.assertOk(fn(port))['data'] for _, fn in views]
                        return got == new
                    got = []
                    harness.wait_for(same, scaled(2), interval=0.01,
                                     what='the change heard (%s)' % what)
                for (name, _), g, n in zip(views, got, new):
                    self.assertEqual(g, n, '%s, after "%s" (%s)' % (name, what, writer))
        # the page cache answered along the way, and the instances without it never did
        self.assertGreater(self.page_cache(a.port).get('hit', 0), 0)
        for svc in (fresh, off):
            self.assertEqual(self.page_cache(svc.port), {'hit': 0, 'miss': 0, 'stale': 0})

    def test_pages_follow_changes_through_this_instance(self):
        self.change_pages('this')

    def test_pages_follow_changes_through_another_instance(self):
        self.change_pages('other')

    def test_pages_follow_changes_straight_into_redis(self):
        self.change_pages('redis')


class FindUncachedTest(FindTest):
    """The same answers with the page cache and the read cache off: every page made from
    Redis. (The page cache's own tests start instances of their own: not run again here.)"""
    ENV = {'FIND_CACHE_MB': '0', 'READ_CACHE_MB': '0'}

    def test_repeated_pages_cost_redis_nothing(self):
        self.skipTest('the page cache is off here')

    def test_revoked_signature_refused_on_kept_pages(self):
        self.skipTest('the page cache is off here')

    def change_pages(self, writer):
        self.skipTest('run by FindTest')

class FindFaultTest(FindCase):
    """The link to Redis cut between the index add and the entity write: no list shows a role
    the data does not have, and none misses a role a write was answered for."""

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                                        'adversary'))
        from harness import FaultProxy
        cls.r = cls.class_redis()
        cls.proxy = FaultProxy(cls.r.port).start()
        wallets = harness.Wallet.random(len(cls.ROLES))
        env = {'REDIS_URL': 'redis://127.0.0.1:%d/0' % cls.proxy.port,
               'REDIS_TIMEOUT_MS': '1000', 'FIND_REPAIR_GRACE_MS': '200',
               'RATE_WRITES_PER_MINUTE': '0', 'ENTITY_CREATE_PER_DAY': '0'}
        cls.svc = cls.class_entityd(redis=cls.r, env=env)
        cls.port = cls.svc.port
        message, _ = harness.current_message(cls.port)
        sigs = sign_wallets(wallets, message)
        cls.c = {role: Caller(w, sigs[w.address], role) for role, w in zip(cls.ROLES, wallets)}

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()
        super().tearDownClass()

    def ready(self):
        harness.wait_for(lambda: self.req('GET', '/readyz')[0] == 200, scaled(20),
                         what='entityd ready again')

    def truth(self, addr, eids):
        """{entity id: [roles]} the stored data gives the wallet, from Redis itself."""
        out = {}
        for e in eids:
            roles = []
            if int(rcli(self.r, 'SISMEMBER', ekey(e, ':owners'), addr)):
                roles.append('owner')
            if int(rcli(self.r, 'SISMEMBER', ekey(e, ':admins'), addr)):
                roles.append('admin')
            if int(rcli(self.r, 'HEXISTS', ekey(e, ':members'), addr)):
                roles.append('member')
            if roles:
                out[e] = roles
        return out

    def test_cut_between_index_and_entity_write(self):
        c = self.c
        me = c['solo']
        p = self.proxy
        eids, acked = [], {}
        # each kind of write, its entity write cut: answered 503, its index entry left behind
        cuts = ((rb'^EVALSHA \w+ 2 ent:', lambda: self.post_entity(
                    me, self.body([me.address, c['owner'].address]))),
                (rb'^EVALSHA \w+ 3 ent:', lambda: self.admins_post(eids[0], c['owner'],
                                                                   [me.address])),
                (rb'^EVALSHA \w+ 5 ent:', lambda: self.force_add(eids[0], c['owner'],
                                                                 [me.address])))
        eids.append(self.create(c['owner'])['id'])
        for pattern, write in cuts:
            for _ in range(3):
                self.ready()
                p.cut(match=pattern)
                st, _, body = write()
                self.assertTrue(p.wait_triggered(scaled(10)))
                p.release()
                self.assertIn(st, (503, 504), body)
        self.ready()
        self.assertGreater(int(rcli(self.r, 'ZCARD', wallet_keys(me.address)[1])), 0,
                           'the index adds went through before the cut')
        for who in (me, c['stranger']):
            self.assertEqual(self.wallet_all(me.address, who), [])
            for role in ('owner', 'admin', 'member'):
                self.assertEqual(self.wallet_all(me.address, who, extra='&role=' + role), [])
        # a workload of writes, the link cut at random commands: afterwards every answered
        # role shows, and nothing the data does not have
        import random
        rnd = random.Random(28)
        for i in range(30):
            self.ready()
            if i % 3 == 0:
                p.cut(at_command=rnd.randint(1, 6))
            kind = rnd.choice(('create', 'admin', 'member', 'unadmin'))
            if kind == 'create':
                st, _, body = self.post_entity(me, self.body([me.address]))
                if st == 201:
                    eids.append(body['data']['id'])
                    acked.setdefault(body['data']['id'], set()).add('owner')
            else:
                e = rnd.choice(eids)
                if kind == 'admin':
                    st, _, _ = self.admins_post(e, c['owner'], [me.address])
                    if st == 200:
                        acked.setdefault(e, set()).add('admin')
                elif kind == 'member':
                    st, _, _ = self.force_add(e, c['owner'], [me.address])
                    if st == 200:
                        acked.setdefault(e, set()).add('member')
                else:
                    st, _, _ = self.admins_delete(e, c['owner'], me.address)
                    if st == 200:
                        acked.get(e, set()).discard('admin')
            p.release()
        self.ready()
        listed = {i['entity']['id']: i['roles'] for i in self.wallet_all(me.address, me,
                                                                           limit=3)}
        # entities created with a cut answer may exist too: the truth is the stored data
        every = set(eids) | set(listed)
        for k in rcli(self.r, 'KEYS', 'ent:{c-*}') or []:
            if k.endswith('}'):
                every.add(k[len('ent:{'):-1])
        truth = self.truth(me.address, every)
        self.assertEqual(listed, truth)
        for e, roles in acked.items():
            for role in roles:
                self.assertIn(role, listed.get(e, []), 'an answered %s of %s missing' % (role, e))


class BackfillTest(FindCase):
    """Entities stored as the previous release stores them (no index keys) show once the
    backfill ran; killed half-way, another instance resumes it."""

    def make_redis(self):
        return self.redis()

    def cursors(self, r):
        """{node: cursor} of the backfill."""
        return {k[len('find:backfill:cursor:'):]: rcli(r, 'GET', k)
                for k in rcli(r, 'KEYS', 'find:backfill:cursor:*') or []}

    def test_backfill_killed_and_resumed(self):
        r = self.make_redis()
        wallets = harness.Wallet.random(3)
        env = {'RATE_WRITES_PER_MINUTE': '0', 'ENTITY_CREATE_PER_DAY': '0'}
        a = self.entityd(redis=r, env=env)
        self.r, self.port = r, a.port
        sigs = sign_wallets(wallets, harness.current_message(a.port)[0])
        owner, admin, member = (Caller(w, sigs[w.address], 'x') for w in wallets)
        harness.wait_for(lambda: rcli(r, 'GET', 'find:backfill:done') == '1', scaled(20),
                         what='the backfill of an empty store done')
        eids = []
        for i in range(240):
            body = self.body([owner.address], name='Old %03d' % i, public=(i % 5 != 0))
            st, _, got = self.post_entity(owner, body)
            self.assertEqual(st, 201, got)
            eids.append(got['data']['id'])
        for e in eids[::4]:
            self.assertOk(self.admins_post(e, owner, [admin.address]))
            self.assertOk(self.force_add(e, owner, [member.address, rand_addr()]))
        want_owner = self.ids(self.wallet_all(owner.address, owner))
        want_member = self.wallet_all(member.address, member)
        want_dir = self.ids(self.dir_all(owner))
        want_q = self.ids(self.dir_all(owner, extra='&q=old%2001'))
        self.assertEqual(len(want_owner), 240)
        self.assertEqual(len(want_dir), 192)
        a.stop()
        # as the previous release left it: no index key at all
        for pattern in ('wallet:*', 'dir:*', 'find:*'):
            for k in rcli(r, 'KEYS', pattern) or []:
                rcli(r, 'DEL', k)
        b = self.entityd(redis=r, env=dict(env, FIND_BACKFILL_BATCH='3'))
        self.port = b.port

        def half_way():
            cur = self.cursors(r)
            return any(v not in ('0', 'done') for v in cur.values()) and \
                int(rcli(r, 'ZCARD', 'dir:{entities}:created')) > 20
        harness.wait_for(half_way, scaled(30), interval=0.005, what='the backfill under way')
        b.kill()  # SIGKILL
        done_before = int(rcli(r, 'ZCARD', 'dir:{entities}:created'))
        self.assertLess(done_before, 240, 'killed half-way')
        self.assertIsNone(rcli(r, 'GET', 'find:backfill:done'))
        cursors = self.cursors(r)
        c2 = self.entityd(redis=r, env=dict(env, FIND_BACKFILL_BATCH='50'))
        self.port = c2.port
        # the killed instance's lease runs out first; then this one resumes from its cursor
        harness.wait_for(lambda: rcli(r, 'GET', 'find:backfill:done') == '1', scaled(60),
                         what='the backfill resumed and done')
        # (log lines go out on a timer)
        harness.wait_for(lambda: 'find backfill: done' in c2.stdout(), scaled(10),
                         what='the backfill logged')
        self.assertIn('find backfill: lease taken', c2.stdout())
        # it resumed where the killed one stopped: the node being scanned, from its cursor
        resumed = [(n, v) for n, v in cursors.items() if v not in ('0', 'done')]
        self.assertTrue(resumed)
        self.assertTrue(any('"node":"%s","cursor":"%s"' % nv in c2.stdout() for nv in resumed),
                        (resumed, c2.stdout()[-2000:]))
        metrics = self.req('GET', '/metrics')[2]
        self.assertIn(b'entityd_find_backfill_done 1', metrics)
        got = self.wallet_all(owner.address, owner)
        self.assertEqual(self.ids(got), want_owner)
        got = self.wallet_all(member.address, member)
        self.assertEqual(sorted(self.ids(got)), sorted(self.ids(want_member)))
        self.assertEqual([i['since'] for i in got],
                         sorted([i['since'] for i in got], reverse=True))
        self.assertEqual({i['entity']['id']: i['roles'] for i in got},
                         {i['entity']['id']: i['roles'] for i in want_member})
        self.assertEqual(self.ids(self.dir_all(owner)), want_dir)
        self.assertEqual(self.ids(self.dir_all(owner, extra='&q=old%2001')), want_q)


if __name__ == '__main__':
    harness.main()
