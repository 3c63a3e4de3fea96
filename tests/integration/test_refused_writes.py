"""A refused write leaves no trace (CONTRACT §12): every write route refused for who is asking
(401, 403, 404) changes no key in Redis but the caller's own write budget (limit:{address},
§7): no wallet index or directory entry, alias claim, erasure or sweep listing. Redis is looked
at twice: every key with its type and contents before and after, and every write command Redis
ran while the request was served (MONITOR, scripts' own commands included), so that an entry
written ahead and taken back again is seen as well. Writes refused by their script after the
check let them through (a full entity, a stale __v) take back what they wrote ahead before
answering, and never an entry that was there before. A write that gives no one a new role
writes no index entry."""

import hashlib
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402
from test_entities import (Caller, EntityCase, new_entity_id, rand_addr, rand_tag,  # noqa: E402
                           sign_wallets)

WRITES = {
    'set', 'setnx', 'setex', 'psetex', 'getset', 'getdel', 'getex', 'append', 'incr', 'incrby',
    'incrbyfloat', 'decr', 'decrby', 'del', 'unlink', 'expire', 'pexpire', 'expireat',
    'pexpireat', 'persist', 'rename', 'renamenx', 'copy', 'restore', 'move', 'hset', 'hsetnx',
    'hmset', 'hdel', 'hincrby', 'hincrbyfloat', 'sadd', 'srem', 'spop', 'smove', 'zadd', 'zrem',
    'zincrby', 'zpopmin', 'zpopmax', 'zremrangebyscore', 'zremrangebyrank', 'zremrangebylex',
    'zunionstore', 'zinterstore', 'zrangestore', 'lpush', 'rpush', 'lpop', 'rpop', 'lrem',
    'lset', 'ltrim', 'linsert', 'xadd', 'xtrim', 'xdel', 'xsetid', 'sunionstore', 'sinterstore',
    'sdiffstore', 'setrange', 'pfadd', 'flushall', 'flushdb',
}


def _nodes(r):
    """The Redis processes holding data: the primaries of a cluster, or the one redis-server."""
    return r.primaries() if hasattr(r, 'primaries') else [r]


def _digest(node, key):
    t = node.cli('TYPE', key)
    t = t.decode() if isinstance(t, bytes) else str(t)
    if t == 'string':
        v = [node.cli('GET', key)]
    elif t == 'hash':
        flat = node.cli('HGETALL', key)
        v = sorted(zip(flat[0::2], flat[1::2]))
    elif t == 'set':
        v = sorted(node.cli('SMEMBERS', key))
    elif t == 'zset':
        v = node.cli('ZRANGE', key, '0', '-1', 'WITHSCORES')
    elif t == 'list':
        v = node.cli('LRANGE', key, '0', '-1')
    elif t == 'stream':
        v = node.cli('XRANGE', key, '-', '+')
    else:
        v = [t]
    return t, hashlib.sha256(repr(v).encode()).hexdigest()


def snapshot(r):
    """{key: (type, digest of its contents)} of every key, on every node that holds data."""
    out = {}
    for node in _nodes(r):
        cursor = b'0'
        for _ in range(100000):
            cursor, keys = node.cli('SCAN', cursor, 'COUNT', '1000', timeout=scaled(10))
            for k in keys:
                out[k.decode()] = _digest(node, k)
            if cursor in (b'0', 0, '0'):
                break
    return out


class Monitor:
    """The write commands every data node runs (MONITOR shows the commands scripts run too),
    read up to a marker sent after the request's answer."""

    def __init__(self, r):
        self.nodes = _nodes(r)
        self.socks, self.lines = [], [[] for _ in self.nodes]
        for node in self.nodes:
            s = socket.create_connection(('127.0.0.1', node.port), timeout=scaled(10))
            s.sendall(b'MONITOR\r\n')
            f = s.makefile('rb')
            assert f.readline().startswith(b'+OK'), 'MONITOR refused'
            self.socks.append((s, f))

    def collect(self, marker):
        """Every line up to the marker's ECHO, from each node."""
        for i, node in enumerate(self.nodes):
            node.cli('ECHO', marker)
            s, f = self.socks[i]
            for _ in range(10000000):
                line = f.readline()
                if not line:
                    raise AssertionError('MONITOR connection closed')
                if b'"ECHO"' in line.upper() and marker.encode() in line:
                    break
                self.lines[i].append(line.decode('utf-8', 'replace'))
        return [ln for lines in self.lines for ln in lines]

    def close(self):
        for s, f in self.socks:
            f.close()
            s.close()


def write_keys(lines):
    """(command, key) of every write command in MONITOR lines."""
    out = []
    for ln in lines:
        parts = ln.split('] ', 1)
        if len(parts) != 2:
            continue
        words = []
        for w in parts[1].strip().split('" "'):
            words.append(w.strip('"'))
        if words and words[0].lower() in WRITES:
            out.append((words[0].lower(), words[1] if len(words) > 1 else ''))
    return out


class RefusedWritesTest(EntityCase):
    ROLES = ('owner', 'admin', 'member', 'stranger', 'platform')

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        wallets = harness.Wallet.random(len(cls.ROLES))
        env = {'PLATFORM_ADMINS': wallets[cls.ROLES.index('platform')].address,
               'MAX_MEMBERS_PER_ENTITY': '20', 'MAX_ADMINS_PER_ENTITY': '5',
               # no write budget in the way of the many refused writes of one caller
               'RATE_WRITES_PER_MINUTE': '100000'}
        cls.svc = cls.class_entityd(redis=cls.r, env=env)
        cls.port = cls.svc.port
        message, _ = harness.current_message(cls.port)
        sigs = sign_wallets(wallets, message)
        cls.c = {role: Caller(w, sigs[w.address], role) for role, w in zip(cls.ROLES, wallets)}

    def entity(self, alias=None):
        """An entity of owner, with admin as admin and member as member."""
        c = self.c
        kw = {'communityURLAlias': alias} if alias else {}
        eid = self.create(c['owner'], owners=[c['owner'].address], **kw)['id']
        self.assertOk(self.admins_post(eid, c['owner'], [c['admin'].address]))
        self.assertOk(self.force_add(eid, c['owner'], [c['member'].address]))
        return eid

    def settled(self):
        """A snapshot once two in a row agree: the work earlier writes sent beside their
        answers (index drops) has landed."""
        looks = []

        def still():
            looks.append(snapshot(self.r))
            return len(looks) > 1 and looks[-1] == looks[-2]
        harness.wait_for(still, scaled(20), interval=0.2, what='Redis still')
        return looks[-1]

    def changed(self, before, after, allowed=()):
        keys = set(before) | set(after)
        return sorted(k for k in keys if before.get(k) != after.get(k) and k not in allowed)

    def assertNoTrace(self, caller, send, statuses, what, allowed_writes=None):
        """send() is answered with one of statuses, and neither the keys nor the commands
        Redis ran show anything of it but the caller's budget. The other callers' budget keys
        are the budget's own upkeep, not the request's: a write-budget lease an earlier request
        took is handed back to Redis on its own timer (RATE_LEASE_MS), whenever it falls."""
        before = self.settled()
        mon = Monitor(self.r)
        try:
            st, _, body = send()
            lines = mon.collect('done-' + rand_tag())
        finally:
            mon.close()
        self.assertIn(st, statuses, '%s: %s' % (what, body))
        budgets = {'limit:{%s}' % c.address.lower() for c in self.c.values()}
        after = snapshot(self.r)
        self.assertEqual(self.changed(before, after, budgets), [], what)
        writes = [w for w in write_keys(lines) if w[1] not in budgets]
        if allowed_writes is None:
            self.assertEqual(writes, [], '%s: Redis wrote %s' % (what, writes[:10]))
        # and nothing sent after the answer either
        self.assertEqual(self.changed(before, self.settled(), budgets), [], what + ' (later)')
        return st, body

    # --- refused for who is asking: nothing written, nothing taken back ---

    def test_force_add_refused(self):
        c = self.c
        eid = self.entity()
        batch = [rand_addr() for _ in range(1000)]
        for who, target, statuses in ((c['stranger'], eid, (403,)),
                                      (c['member'], eid, (403,)),
                                      (c['stranger'], new_entity_id(), (404,))):
            self.assertNoTrace(who, lambda: self.force_add(target, who, batch), statuses,
                               'force-add by %s' % who.role)
        self.assertNoTrace(c['stranger'], lambda: self.force_add(eid, c['stranger'], batch,
                                                                 signed=False),
                           (401,), 'unsigned force-add')

    def test_update_refused(self):
        c = self.c
        eid = self.entity(alias='rw-' + rand_tag())
        owners = [rand_addr() for _ in range(49)]
        for who in (c['stranger'], c['admin'], c['member']):
            for kw in ({}, {'communityURLAlias': 'rw-' + rand_tag()},
                       {'name': 'Renamed ' + rand_tag()}):
                self.assertNoTrace(who, lambda: self.update(who, eid, owners + [who.address],
                                                            **kw),
                                   (403,), 'update by %s %s' % (who.role, kw))
        self.assertNoTrace(c['stranger'], lambda: self.update(
            c['stranger'], new_entity_id(), owners, communityURLAlias='rw-' + rand_tag()),
            (404,), 'update of an unknown id')

    def test_admins_add_refused(self):
        c = self.c
        eid = self.entity()
        batch = [rand_addr() for _ in range(100)]
        for who, target, st in ((c['stranger'], eid, 403), (c['admin'], eid, 403),
                                (c['stranger'], new_entity_id(), 404)):
            self.assertNoTrace(who, lambda: self.admins_post(target, who, batch), (st,),
                               'admins add by %s' % who.role)

    def test_delete_refused(self):
        c = self.c
        eid = self.entity(alias='rw-' + rand_tag())
        for who, target, st in ((c['stranger'], eid, 403), (c['admin'], eid, 403),
                                (c['member'], eid, 403), (c['stranger'], new_entity_id(), 404)):
            self.assertNoTrace(who, lambda: self.req(
                'DELETE', '/api/entities/%s?%s' % (target, who.q)), (st,),
                'delete by %s' % who.role)

    def test_member_removal_refused(self):
        c = self.c
        eid = self.entity()
        m = c['member'].address
        for who, target, st in ((c['stranger'], eid, 403), (c['member'], eid, 403),
                                (c['stranger'], new_entity_id(), 404)):
            self.assertNoTrace(who, lambda: self.req(
                'DELETE', '/api/entities/%s/members/%s?%s' % (target, m, who.q)), (st,),
                'member removal by %s' % who.role)
            self.assertNoTrace(who, lambda: self.req(
                'POST', '/api/entities/%s/members/remove?%s' % (target, who.q),
                {'addresses': [m] + [rand_addr() for _ in range(20)]}), (st,),
                'members remove by %s' % who.role)
        self.assertNoTrace(c['stranger'], lambda: self.req(
            'POST', '/api/entities/%s/leave?%s' % (new_entity_id(), c['stranger'].q)), (404,),
            'leave of an unknown id')

    def test_disabled_entity_refuses_its_staff(self):
        c = self.c
        eid = self.entity()
        self.assertOk(self.update(c['platform'], eid, [c['owner'].address], isEnabled=False))
        self.assertNoTrace(c['owner'], lambda: self.force_add(eid, c['owner'],
                                                              [rand_addr() for _ in range(10)]),
                           (403,), 'force-add into a disabled entity')
        self.assertNoTrace(c['owner'], lambda: self.update(
            c['owner'], eid, [c['owner'].address, rand_addr()]), (403,),
            'update of a disabled entity')
        self.assertNoTrace(c['stranger'], lambda: self.admins_post(
            eid, c['stranger'], [rand_addr()]), (404,), 'admins add by a stranger, disabled')

    # --- refused by the script after the check: what was written ahead is taken back ---

    def test_full_entity_takes_back_its_index_entries(self):
        """MAX_MEMBERS_PER_ENTITY 20: a force-add past it is 409 with nothing applied, and the
        index entries it wrote ahead are gone before the answer; the entries of addresses that
        had one (the owner's, as owner) stay as they were."""
        c = self.c
        eid = self.entity()
        batch = [c['owner'].address, c['member'].address] + [rand_addr() for _ in range(30)]
        before = self.settled()
        st, _, body = self.force_add(eid, c['owner'], batch)
        self.assertEqual(st, 409, body)
        budget = 'limit:{%s}' % c['owner'].address.lower()
        self.assertEqual(self.changed(before, snapshot(self.r), {budget}), [])
        batch = [rand_addr() for _ in range(10)]
        self.assertOk(self.force_add(eid, c['owner'], batch))  # room for these: indexed
        for a in batch:
            self.assertEqual(len(self.r.cli('ZRANGE', 'wallet:{%s}:member' % a, '0', '-1')), 1)

    def test_stale_version_takes_back_index_alias_and_name(self):
        """An update with a stale __v passes the check and is refused by its script (409):
        its new owners' index entries, its new name's directory entry and its alias claim are
        all gone before the answer."""
        c = self.c
        eid = self.entity(alias='rw-' + rand_tag())
        before = self.settled()
        st, _, body = self.update(c['owner'], eid,
                                  [c['owner'].address] + [rand_addr() for _ in range(5)],
                                  name='Other ' + rand_tag(), **{'__v': 999999},
                                  communityURLAlias='rw-' + rand_tag())
        self.assertEqual(st, 409, body)
        budget = 'limit:{%s}' % c['owner'].address.lower()
        self.assertEqual(self.changed(before, snapshot(self.r), {budget}), [])

    # --- no new role, no index entry ---

    def test_no_new_role_writes_no_index_entry(self):
        c = self.c
        eid = self.entity()
        ent = self.assertOk(self.get_entity(eid, c['owner']))['data']
        # same owners, same name: the owners' index entries are not written again
        wallets = ['wallet:{%s}:%s' % (a, s) for a in (c['owner'].address, c['member'].address,
                                                      c['admin'].address)
                   for s in ('meta', 'any', 'owner', 'admin', 'member')]
        before = self.settled()
        mon = Monitor(self.r)
        try:
            self.assertOk(self.update(c['owner'], eid, [c['owner'].address], name=ent['name']))
            self.assertOk(self.force_add(eid, c['owner'], [c['member'].address]))
            self.assertOk(self.admins_post(eid, c['owner'], [c['admin'].address]))
            lines = mon.collect('done-' + rand_tag())
        finally:
            mon.close()
        after = self.settled()
        self.assertEqual([k for k in wallets if before.get(k) != after.get(k)], [])
        touched = [w for w in write_keys(lines)
                   if w[1].startswith('wallet:') or w[1].startswith('dir:')]
        self.assertEqual(touched, [])


class RefusedAfterCheckTest(EntityCase):
    """The role taken away between the check and the write script (CONTRACT §12): the script
    refuses, and the request takes back the index entries it wrote ahead before answering,
    leaving the entry that was there before (the owner's) as it was. The replies of Redis are
    held (a proxy) from the index add on, while the test removes the caller's role."""
    ROLES = ('owner', 'admin')

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                                        'adversary'))
        from harness import FaultProxy
        cls.r = cls.class_redis()
        cls.proxy = FaultProxy(cls.r.port).start()
        wallets = harness.Wallet.random(len(cls.ROLES))
        env = {'REDIS_URL': 'redis://127.0.0.1:%d/0' % cls.proxy.port,
               'REDIS_TIMEOUT_MS': '30000', 'RATE_WRITES_PER_MINUTE': '0'}
        cls.svc = cls.class_entityd(redis=cls.r, env=env)
        cls.port = cls.svc.port
        message, _ = harness.current_message(cls.port)
        sigs = sign_wallets(wallets, message)
        cls.c = {role: Caller(w, sigs[w.address], role) for role, w in zip(cls.ROLES, wallets)}

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()
        super().tearDownClass()

    settled = RefusedWritesTest.settled
    changed = RefusedWritesTest.changed

    def test_role_removed_between_check_and_script(self):
        c = self.c
        eid = self.create(c['owner'], owners=[c['owner'].address])['id']
        self.assertOk(self.admins_post(eid, c['owner'], [c['admin'].address]))
        admins, owners = 'ent:{%s}:admins' % eid, 'ent:{%s}:owners' % eid
        # (the write, the role set and the caller whose role goes between check and script)
        cases = ((lambda: self.force_add(eid, c['admin'], [c['owner'].address, rand_addr(),
                                                           rand_addr()]),
                  admins, c['admin'].address),
                 (lambda: self.admins_post(eid, c['owner'], [rand_addr(), rand_addr()]),
                  owners, c['owner'].address),
                 (lambda: self.update(c['owner'], eid, [c['owner'].address, rand_addr()],
                                      name='Renamed ' + rand_tag()),
                  owners, c['owner'].address))
        for send, roles, who in cases:
            before = self.settled()
            out = []
            t = threading.Thread(target=lambda: out.append(send()))
            self.proxy.stall(match=rb'^EVALSHA \w+ \d+ (wallet:|dir:)')
            t.start()
            try:
                self.assertTrue(self.proxy.wait_triggered(scaled(20)), 'no index add: %r' % out)
                self.r.cli('SREM', roles, who)
            finally:
                self.proxy.release()
                t.join(scaled(30))
            self.assertEqual(len(out), 1)
            st, _, body = out[0]
            self.assertEqual(st, 403, body)
            self.assertEqual(self.changed(before, snapshot(self.r), {roles}), [])
            self.assertEqual(self.changed(before, self.settled(), {roles}), [])
            self.r.cli('SADD', roles, who)


    def test_role_lost_and_given_again_between_check_and_script(self):
        """The check finds the address a member (so no entry is written ahead); its removal
        and the removal's index drop land before the force-add's script, which makes it a
        member again: the entry is added before the answer."""
        c = self.c
        eid = self.create(c['owner'], owners=[c['owner'].address])['id']
        m = rand_addr()
        self.assertOk(self.force_add(eid, c['owner'], [m]))
        wk = ['wallet:{%s}:%s' % (m, s) for s in ('meta', 'any', 'owner', 'admin', 'member')]
        self.assertEqual(len(self.r.cli('ZRANGE', wk[4], '0', '-1')), 1)
        out = []
        t = threading.Thread(target=lambda: out.append(self.force_add(eid, c['owner'], [m])))
        self.proxy.stall(match=rb'^EVALSHA \w+ 4 ent:')  # the check's answer held
        t.start()
        try:
            self.assertTrue(self.proxy.wait_triggered(scaled(20)), 'no check: %r' % out)
            # the member removed, and its index entry dropped, as a removal would
            self.r.cli('HDEL', 'ent:{%s}:members' % eid, m)
            order = 'ent:{%s}:members:order' % eid
            for e in self.r.cli('ZRANGE', order, '0', '-1') or []:
                if m.encode() in e:
                    self.r.cli('ZREM', order, e)
            for k in wk:
                self.r.cli('DEL', k)
        finally:
            self.proxy.release()
            t.join(scaled(30))
        st, _, body = out[0]
        self.assertEqual((st, body.get('added')), (200, 1), body)
        self.assertEqual(len(self.r.cli('ZRANGE', wk[4], '0', '-1')), 1, 'no index entry')


if __name__ == '__main__':
    harness.main()
