"""Alias uniqueness when an entity write has an unknown outcome.

A write that times out (504) or loses its connection (503) after it was sent may still happen
in Redis, or may never happen. Either way the alias claim made for it must stay, so that no
other entity can take the alias while the write may still land; only the holder's own record
(the stale-claim check, after the grace period) or an answer that the write did not happen may
free it.

entityd reaches Redis through the fault proxy (support/faultproxy.py) armed to act once, when
it sees entity A's update script (the only command naming A's hash, owners, admins and webhooks
in that order) pass towards Redis:
- 'sleep': DEBUG SLEEP 0.8 on another connection first, so Redis runs the script late, after
  entityd gave up on it (REDIS_TIMEOUT_MS=500) and after everything entityd sent in between;
- 'hold': the script goes through at once, its answer (and every later one) is held 0.8 s;
- 'drop': both sides of the connection are closed and the script never reaches Redis.
Then entity B asks for the same alias. Afterwards at most one entity names the alias, and the
alias key names that one (the invariant checker of invariants.py over every key)."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import FaultProxy, scaled  # noqa: E402
from invariants import check_invariants  # noqa: E402

STALL = 0.8
TIMEOUT_MS = 500


def body(owner, eid=None, **kw):
    b = {'name': 'Alias Guild', 'description': '', 'ownerAddresses': [owner], 'twitter': '',
         'discord': '', 'website': '', 'imageUrl': ''}
    if eid:
        b['id'] = eid
    b.update(kw)
    return b


class AliasUnknownOutcomeTest(harness.ServiceTestCase):

    def setUp(self):
        super().setUp()
        self.start_redis()
        msg, _ = harness.current_message(self.svc.port)
        self.wa, self.wb = harness.Wallet.random(2)
        self.qa = 'address=%s&signature=%s' % self.wa.sign(msg)
        self.qb = 'address=%s&signature=%s' % self.wb.sign(msg)
        self.ea = self.create(self.qa, self.wa.address, 'old-a-%d' % os.getpid())
        self.eb = self.create(self.qb, self.wb.address, 'old-b-%d' % os.getpid())

    def start_redis(self):
        """Sets self.r, self.proxy (the one A's update passes) and self.svc."""
        self.r = self.redis(extra_args=['--enable-debug-command', 'local'])
        self.proxy = FaultProxy(self.r).start()
        self.addCleanup(self.proxy.stop)
        self.svc = self.entityd(redis=None, env={'REDIS_URL': self.proxy.url,
                                                 'REDIS_TIMEOUT_MS': TIMEOUT_MS,
                                                 'READ_CACHE_MB': '0'})

    def alias(self, prefix):
        return '%s-%d' % (prefix, os.getpid())

    def post(self, q, b):
        return harness.request(self.svc.port, 'POST', '/api/entities?' + q, body=b,
                               timeout=scaled(10))

    def create(self, q, owner, alias):
        st, _, b = self.post(q, body(owner, communityURLAlias=alias))
        self.assertEqual(st, 201, b)
        return b['data']['id']

    def holder(self, alias):
        v = self.r.cli('GET', 'alias:{%s}' % alias)
        return v.decode().split(' ')[0] if v else None

    def named(self, eid):
        return self.r.cli('HGET', 'ent:{%s}' % eid, 'communityURLAlias').decode()

    def api_alias(self, q, eid):
        st, _, b = harness.request(self.svc.port, 'GET', '/api/entities/%s?%s' % (eid, q))
        self.assertEqual(st, 200, b)
        return b['data']['communityURLAlias']

    def race(self, mode, alias):
        """A's update setting alias meets the proxy's mode; then B's update asks for alias.
        Returns (A's status, B's status)."""
        # The update script's keys as sent: A's hash, owners, admins, webhooks (the check of the
        # caller's right before it, CONTRACT §12, names 4 too, ending with the members).
        a = re.escape(('ent:{%s}' % self.ea).encode())
        match = rb'(?:^| )4 %s %s:owners %s:admins %s:webhooks(?: |$)' % (a, a, a, a)
        if mode == 'sleep':
            self.proxy.sleep_upstream(STALL, match=match)
        elif mode == 'hold':
            self.proxy.stall(match=match, for_s=STALL)
        else:
            self.proxy.cut(match=match, link_only=True)
        sa, _, ba = self.post(self.qa, body(self.wa.address, self.ea, communityURLAlias=alias))
        self.assertTrue(self.proxy.triggered.is_set(), 'the proxy never saw A\'s update')
        self.svc.wait_ready()  # after a dropped connection, entityd is connected again
        # B asks once whatever Redis held back has run (a fresh command is answered and the
        # held answers are out): asked sooner, B's own commands would wait behind the stall
        # and, on a loaded machine, past their deadline too.
        node = self.proxy.upstream  # the one A's update went to
        harness.wait_for(lambda: node.cli('PING', timeout=scaled(5)) in ('PONG', b'PONG') and
                         time.monotonic() > self.proxy.stall_until, scaled(10), what='Redis')
        sb, _, bb = self.post(self.qb, body(self.wb.address, self.eb, communityURLAlias=alias))
        return (sa, ba), (sb, bb)

    def assert_unique(self, alias):
        names = [e for e in (self.ea, self.eb) if self.named(e) == alias]
        via_api = [e for e, q in ((self.ea, self.qa), (self.eb, self.qb))
                   if self.api_alias(q, e) == alias]
        self.assertLessEqual(len(names), 1, 'both entities name %s' % alias)
        self.assertEqual(via_api, names)
        if names:
            self.assertEqual(self.holder(alias), names[0])
        problems = check_invariants(self.r)
        self.assertEqual(problems, [], '\n'.join(problems[:20]))
        return names

    def test_late_script_keeps_the_claim(self):
        # Redis runs A's script after entityd answered 504, and after anything sent meanwhile.
        alias = self.alias('late')
        (sa, ba), (sb, bb) = self.race('sleep', alias)
        self.assertEqual(sa, 504, ba)
        self.assertEqual(sb, 409, bb)
        self.assertEqual(self.assert_unique(alias), [self.ea])

    def test_late_answer_keeps_the_claim(self):
        # Redis runs A's script at once; only its answer comes after entityd's deadline.
        alias = self.alias('slow')
        (sa, ba), (sb, bb) = self.race('hold', alias)
        self.assertEqual(sa, 504, ba)
        self.assertEqual(sb, 409, bb)
        self.assertEqual(self.assert_unique(alias), [self.ea])

    def test_lost_script_frees_the_alias_once_stale(self):
        # The connection drops with A's script unsent: A's write never happens, but entityd
        # cannot know. The claim stays until it is older than the grace period; then the
        # holder's record (not naming the alias) lets B take it over.
        alias = self.alias('lost')
        (sa, ba), (sb, bb) = self.race('drop', alias)
        self.assertEqual(sa, 503, ba)
        self.assertEqual(sb, 409, bb)
        self.assertEqual(self.holder(alias), self.ea)
        self.assertEqual(self.assert_unique(alias), [])
        # Age the claim past the grace period (60 s), keeping its holder and token.
        key = 'alias:{%s}' % alias
        holder, at, *token = self.r.cli('GET', key).decode().split(' ')
        self.r.cli('SET', key, ' '.join([holder, str(int(at) - 120)] + token))
        st, _, b = self.post(self.qb, body(self.wb.address, self.eb, communityURLAlias=alias))
        self.assertEqual(st, 200, b)
        self.assertEqual(self.assert_unique(alias), [self.eb])

    def test_refused_write_releases_its_claim(self):
        # A known failure (409 on a stale __v): the write did not happen, the claim goes at once.
        alias = self.alias('refused')
        st, _, b = self.post(self.qa, body(self.wa.address, self.ea, communityURLAlias=alias,
                                           __v=7))
        self.assertEqual(st, 409, b)
        harness.wait_for(lambda: self.holder(alias) is None, scaled(2), what='claim released')
        st, _, b = self.post(self.qb, body(self.wb.address, self.eb, communityURLAlias=alias))
        self.assertEqual(st, 200, b)
        self.assertEqual(self.assert_unique(alias), [self.eb])


if __name__ == '__main__':
    harness.main()
