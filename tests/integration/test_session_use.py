"""Session tokens as credentials outside the URL (CONTRACT section 13, "Using it"): Bearer and
cookie on reads, writes, recovered and optional routes; the address check; bad, expired and
unknown tokens; the cookie cleared where signing is optional; a session ended in Redis seen by
a second instance; lastUsedAt at most once a minute; no token in any log line or error."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from support.resp import RespReader, resp_encode  # noqa: E402
from harness import (auth_query, fresh_address, fresh_wallet, make_session, metric,  # noqa: E402
                     new_token, scaled, session_key, token_parts)

ENV = {'LOG_LEVEL': 'debug'}
USED = []  # every token sent in this run, looked for in the logs at the end


# The harness's AUTH_DOMAIN (the service's default) with no AUTH_URI: the service's own origin.
OWN_ORIGIN = 'https://entityd.local'


def bearer(token):
    USED.append(token)
    return {'Authorization': 'Bearer ' + token}


def cookie(token):
    """The cookie as a browser on the service's own origin sends it: with that Origin (a
    cookie-signed write from any other origin is refused before anything is spent)."""
    USED.append(token)
    return {'Cookie': 'theme=dark; entityd_session=' + token, 'Origin': OWN_ORIGIN}


class Subscriber:
    """Keyspace notifications of one key on a socket of our own: counts its hset events up to
    a PING, which Redis answers after every notification of commands run before it."""

    def __init__(self, redis, key):
        redis.cli('CONFIG', 'SET', 'notify-keyspace-events', 'Kh')
        self.sock = socket.create_connection(('127.0.0.1', redis.port), timeout=scaled(5))
        self.reader = RespReader(self.sock)
        self.channel = '__keyspace@0__:' + key
        self.sock.sendall(resp_encode(['SUBSCRIBE', self.channel]))
        self._until(lambda m: m[0] == b'subscribe')

    def _until(self, done):
        seen = []
        for _ in range(10000):
            m = self.reader.read()
            if done(m):
                return seen
            seen.append(m)
        raise AssertionError('no end of the notifications')

    def hsets_until_ping(self):
        self.sock.sendall(resp_encode(['PING']))
        seen = self._until(lambda m: isinstance(m, list) and m[0] == b'pong')
        return sum(1 for m in seen if m[0] == b'message' and m[2] == b'hset')

    def close(self):
        self.sock.close()


class SessionUseTest(harness.ServiceTestCase):
    """Two instances (A, B) on one Redis; sessions written straight into it."""

    @classmethod
    def setUpClass(cls):
        cls.r = cls.class_redis()
        cls.a = cls.class_entityd(redis=cls.r, env=ENV)
        cls.b = cls.class_entityd(redis=cls.r, env=ENV)
        cls.owner, cls.member, cls.stranger = fresh_wallet(), fresh_wallet(), fresh_wallet()
        msg, _ = harness.current_message(cls.a.port)
        cls.owner_q = auth_query(*cls.owner.sign(msg))
        cls.private = cls.create(cls, public=False)
        cls.public = cls.create(cls, public=True)

    def create(self, public):
        body = {'name': 'Session Guild', 'description': 'sessions',
                'ownerAddresses': [self.owner.address], 'twitter': '', 'discord': '',
                'website': '', 'imageUrl': '', 'public': public}
        st, _, b = self.a.request('POST', '/api/entities?' + self.owner_q, body)
        assert st == 201, (st, b)
        eid = b['data']['id']
        st, _, b = self.a.request('POST', '/api/entities/%s/force-add?%s' % (eid, self.owner_q),
                                  {'addresses': [self.member.address], 'Chain': 'eth'})
        assert st == 200, (st, b)
        return eid

    def session(self, wallet=None):
        """A session of wallet made as a client makes one: POST /api/auth/session with its
        signature of the epoch's message (an epoch-signature session)."""
        w = wallet or self.owner
        msg, _ = harness.current_message(self.a.port)
        address, sig = w.sign(msg)
        st, _, b = self.a.request('POST', '/api/auth/session',
                                  {'address': address, 'signature': sig})
        assert st == 201, (st, b)
        return b['data']['token']

    def assertNoToken(self, resp, token):
        self.assertNotIn(token, repr(resp))
        self.assertNotIn(token[3:], repr(resp))

    def assertDead(self, resp, token):
        self.assertEnvelope(resp, 401, 'unauthenticated')
        self.assertNoToken(resp, token)

    # --- reads, writes, recovered and optional routes ---

    def test_read_private_entity_with_bearer_and_cookie(self):
        token = self.session()
        path = '/api/entities/%s' % self.private
        for hdrs in (bearer(token), cookie(token)):
            st, _, b = self.a.request('GET', path, headers=hdrs)
            self.assertEqual(st, 200, b)
            self.assertIs(b['data']['public'], False)
        # The same answers as a signature: a stranger's session is refused.
        st, _, b = self.a.request('GET', path, headers=bearer(self.session(self.stranger)))
        self.assertEqual(st, 403, b)
        # A read route of AUTH_REQUIRED with the read riding along: the users page.
        st, _, b = self.a.request('GET', path + '/users', headers=cookie(token))
        self.assertEqual(st, 200, b)

    def test_writes_with_bearer_and_cookie(self):
        token = self.session()
        body = {'name': 'By Token', 'description': '', 'ownerAddresses': [self.owner.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': ''}
        st, _, b = self.a.request('POST', '/api/entities', body, headers=bearer(token))
        self.assertEqual(st, 201, b)
        eid = b['data']['id']
        st, _, b = self.a.request('POST', '/api/entities/%s/force-add' % eid,
                                  {'addresses': [self.member.address], 'Chain': 'eth'},
                                  headers=cookie(token))
        self.assertEqual(st, 200, b)
        award = {'member': self.member.address, 'title': 'By cookie', 'xp': 5}
        st, _, b = self.a.request('POST', '/api/entities/%s/contributions' % eid, award,
                                  headers=cookie(token))
        self.assertEqual(st, 201, b)
        # The award names the token's address as its author.
        self.assertIn(self.owner.address, repr(b['data']).lower())
        # A member's session may not award: the same answer as a member's signature.
        st, _, b = self.a.request('POST', '/api/entities/%s/contributions' % eid, award,
                                  headers=bearer(self.session(self.member)))
        self.assertEqual(st, 403, b)

    def test_recovered_route_level_update(self):
        level = {'name': 'Gold', 'skillIds': [], 'scores': [], 'XP': 10}
        path = '/api/entities/%s/levels/lv-token/update' % self.public
        st, _, b = self.a.request('POST', path, level, headers=bearer(self.session()))
        self.assertEqual(st, 201, b)
        st, _, b = self.a.request('POST', path, level, headers=cookie(self.session(self.stranger)))
        self.assertEqual(st, 403, b)

    def test_optional_route_with_token_needs_no_query(self):
        for hdrs in (bearer(self.session()), cookie(self.session())):
            st, h, b = self.a.request('GET', '/api/entities/%s' % self.public, headers=hdrs)
            self.assertEqual(st, 200, b)
            self.assertNotIn('set-cookie', h)
            st, _, b = self.a.request('GET', '/api/entities?limit=5', headers=hdrs)
            self.assertEqual(st, 200, b)

    # --- the address, bad tokens, the cookie ---

    def test_token_and_query_address_must_agree(self):
        token = self.session()
        other = fresh_address()
        for method, path, body in (
                ('GET', '/api/entities/%s?address=%s' % (self.private, other), None),
                ('POST', '/api/entities/%s/contributions?address=%s' % (self.private, other),
                 {'member': self.member.address, 'title': 'x', 'xp': 1})):
            for hdrs in (bearer(token), cookie(token)):
                resp = self.a.request(method, path, body, headers=hdrs)
                self.assertEnvelope(resp, 400, 'invalid_request', field='address')
                self.assertNoToken(resp, token)
        # The same address (any case) is fine.
        st, _, b = self.a.request('GET', '/api/entities/%s?address=%s' % (
            self.private, harness.eip55(self.owner.address)), headers=bearer(token))
        self.assertEqual(st, 200, b)

    def test_bad_expired_unknown_bearer_is_401(self):
        expired = make_session(self.r, self.owner, -1000)
        unknown = new_token(self.owner.address)
        forged = 'es_' + self.owner.address[2:] + 'Z' * 32
        path = '/api/entities/%s' % self.public
        for token in (expired, unknown, forged, unknown[:-1]):
            for p in (path, path + '/users'):
                self.assertDead(self.a.request('GET', p, headers=bearer(token)), token)
            self.assertDead(self.a.request(
                'POST', path + '/contributions', {'member': self.member.address, 'title': 'x',
                                                  'xp': 1}, headers=bearer(token)), token)
        self.assertEnvelope(self.a.request('GET', path, headers={'Authorization': 'Basic eDp5'}),
                            401, 'unauthenticated')
        # Another session's record under the token's id never matches (the hash is compared).
        live = self.session()
        sid, _ = token_parts(live)
        rec = self.r.cli('HGET', session_key(self.owner.address), sid).decode()
        self.r.cli('HSET', session_key(self.owner.address), sid,
                   rec.replace(token_parts(live)[1], '0' * 64))
        self.assertDead(self.a.request('GET', path, headers=bearer(live)), live)

    def test_bad_cookie_ignored_and_cleared_where_optional(self):
        dead = new_token(self.owner.address)
        path = '/api/entities/%s?address=%s' % (self.public, self.owner.address)
        for value in (dead, 'garbage', 'x' * 300):
            st, h, b = self.a.request('GET', path, headers=cookie(value))
            self.assertEqual(st, 200, b)
            self.assertIn('set-cookie', h)
            c = h['set-cookie']
            self.assertTrue(c.startswith('entityd_session=;'), c)
            for attr in ('Max-Age=0', 'Path=/api', 'HttpOnly', 'Secure', 'SameSite=Lax'):
                self.assertIn(attr, c)
            self.assertNoToken((st, h, b), dead)
        # Unsigned, as if it were not there: a private entity is not shown.
        st, h, b = self.a.request('GET', '/api/entities/%s?address=%s' % (
            self.private, self.owner.address), headers=cookie(dead))
        self.assertEqual(st, 401, b)
        self.assertIn('Max-Age=0', h.get('set-cookie', ''))
        # Where signing is required, 401.
        for value in (dead, 'garbage'):
            resp = self.a.request('GET', '/api/entities/%s/users' % self.public,
                                  headers=cookie(value))
            self.assertDead(resp, dead)
            resp = self.a.request('POST', '/api/entities/%s/contributions' % self.public,
                                  {'member': self.member.address, 'title': 'x', 'xp': 1},
                                  headers=cookie(value))
            self.assertDead(resp, dead)

    def test_bearer_wins_over_cookie(self):
        live, dead = self.session(), new_token(self.owner.address)
        path = '/api/entities/%s' % self.private
        both = dict(bearer(live), **cookie(dead))
        st, h, b = self.a.request('GET', path, headers=both)
        self.assertEqual(st, 200, b)
        both = dict(bearer(dead), **cookie(live))
        self.assertDead(self.a.request('GET', path, headers=both), dead)
        # The stranger's Bearer decides, not the owner's cookie.
        both = dict(bearer(self.session(self.stranger)), **cookie(live))
        st, _, b = self.a.request('GET', path, headers=both)
        self.assertEqual(st, 403, b)

    # --- ending, lastUsedAt ---

    def test_revoke_all_refused_by_second_instance(self):
        token = self.session()
        sid, _ = token_parts(token)
        # With the address: a dead cookie is ignored on this optional route, and unsigned the
        # private entity is refused all the same.
        read = ('GET', '/api/entities/%s?address=%s' % (self.private, self.owner.address), None)
        write = ('POST', '/api/entities/%s/levels/lv-end/update' % self.private,
                 {'name': 'L', 'skillIds': [], 'scores': [], 'XP': 1})
        # A kept find page is answered with no read of its own: the check is made alone.
        find = ('GET', '/api/wallets/%s/entities' % self.owner.address, None)
        for svc in (self.a, self.b):
            for method, path, body in (read, write, find, find):
                st, _, b = svc.request(method, path, body, headers=bearer(token))
                self.assertIn(st, (200, 201), b)
        # Ended by revoke-all through instance A: every instance refuses it on its very next
        # request once Redis's announcement has reached it (it is sent
        # before the writer has its answer, but on another connection: the test waits for it,
        # as a request from elsewhere would be microseconds behind it), read or write, Bearer or
        # cookie, whatever it kept.
        heard = {svc: metric(svc, 'entityd_read_cache_invalidations_total', 0)
                 for svc in (self.a, self.b)}
        st, _, b = self.a.request('POST', '/api/auth/sessions/revoke-all', None,
                                  headers=bearer(token))
        self.assertEqual(st, 200, b)
        self.assertEqual(self.r.cli('HGET', session_key(self.owner.address), sid), None)
        for svc, n in heard.items():
            harness.wait_for(
                lambda: metric(svc, 'entityd_read_cache_invalidations_total', 0) > n,
                scaled(5), what='the invalidation heard')
        for svc in (self.b, self.a):
            for method, path, body in (read, write, find):
                for hdrs in (bearer(token), cookie(token)):
                    self.assertDead(svc.request(method, path, body, headers=hdrs), token)

    def test_last_used_at_written_once_a_minute(self):
        key = session_key(self.owner.address)
        for _ in range(3):  # a try that crosses a minute boundary is made again
            token = self.session()
            sid, _ = token_parts(token)
            minute = int(time.time() * 1000) // 60000 * 60000
            st, _, b = self.a.request('GET', '/api/entities/%s' % self.private,
                                      headers=bearer(token))
            self.assertEqual(st, 200, b)
            # Fire and forget: it lands shortly after the answer.
            harness.wait_for(lambda: self.r.cli('HGET', key, 'u:' + sid) is not None, scaled(5),
                             what='lastUsedAt written')
            used = int(self.r.cli('HGET', key, 'u:' + sid))
            self.assertIn(used, (minute, minute + 60000))
            self.assertEqual(used % 60000, 0)
            sub = Subscriber(self.r, key)
            try:
                for path in ('/api/entities/%s' % self.private,
                             '/api/entities/%s/users' % self.private):
                    st, _, b = self.a.request('GET', path, headers=bearer(token))
                    self.assertEqual(st, 200, b)
                # The last request's own check ran after any touch the one before sent (one
                # connection, in order), and the PING after it: every write is counted.
                writes = sub.hsets_until_ping()
            finally:
                sub.close()
            if int(time.time() * 1000) // 60000 * 60000 != used:
                continue
            self.assertEqual(writes, 0)
            self.assertEqual(int(self.r.cli('HGET', key, 'u:' + sid)), used)
            return
        self.fail('three tries crossed a minute boundary')

    def test_touch_never_brings_back_an_ended_session(self):
        # The script alone, as the service runs it: an ended session gets no u:<id> field.
        token = self.session()
        sid, _ = token_parts(token)
        key = session_key(self.owner.address)
        self.r.cli('HDEL', key, sid, 'u:' + sid)  # as session_end.lua ends one
        st, _, b = self.a.request('GET', '/api/entities/%s' % self.private,
                                  headers=bearer(token))
        self.assertEqual(st, 401, b)
        self.assertIsNone(self.r.cli('HGET', key, 'u:' + sid))

    # --- last: no token in any log line ---

    def test_zz_no_token_in_logs(self):
        token = self.session()
        for svc in (self.a, self.b):
            st, _, b = svc.request('GET', '/api/entities/%s' % self.private,
                                   headers=bearer(token))
            self.assertEqual(st, 200, b)
            resp = svc.request('GET', '/api/entities/%s' % self.private,
                               headers=bearer(token[:-1] + 'g'))
            self.assertDead(resp, token)
            # Logs are written off the loop: wait for this request's line, the last one.
            rid = resp[1]['x-request-id']
            harness.wait_for(lambda: [r for r in svc.logs() if r.get('request_id') == rid],
                             scaled(5), what='the request log line')
        self.assertGreater(len(USED), 5)
        for svc in (self.a, self.b):
            text = svc.stdout() + svc.stderr()
            for t in USED:
                if len(t) < 20:
                    continue
                self.assertNotIn(t, text)
                self.assertNotIn(t[3:], text)


if __name__ == '__main__':
    harness.main()
