"""Browsers and credentials (CONTRACT section 13, "Browsers"): with CORS_ORIGINS listing
origins, answers to them carry Access-Control-Allow-Credentials and preflights allow the
Authorization header; with `*`, never credentials. A request whose one credential is the
entityd_session cookie, other than GET/HEAD, must come from a listed origin or the service's
own (AUTH_URI's origin, else https://AUTH_DOMAIN), else 403 before anything is spent (section
12: Redis sees no command). Bearer and signature requests are not concerned."""

import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import logscan  # noqa: E402
from harness import scaled  # noqa: E402

APP = 'https://app.example'
OWN = 'https://api.example'
# Shaped like a session token (section 13) but no live session: what auth then does with it is
# not this file's business, only that the Origin check lets it through or not.
COOKIE = 'entityd_session=es_' + '0' * 40 + uuid.uuid4().hex + uuid.uuid4().hex[:8]
BEARER = 'Bearer es_' + '1' * 72
# Redis commands the test itself, or the service's heartbeat, send whatever the requests.
NOT_THE_REQUESTS = {'config', 'info', 'publish', 'ping', 'echo', 'client', 'hello', 'keys'}


def entity_body(owner):
    return {'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
            'ownerAddresses': [owner], 'twitter': '', 'discord': '', 'website': '',
            'imageUrl': ''}


class CorsCredentialsTest(harness.ServiceTestCase):
    PREFLIGHT = {'Origin': APP, 'Access-Control-Request-Method': 'POST',
                 'Access-Control-Request-Headers': 'authorization, content-type'}

    def req(self, svc, method, path, body=None, headers=None):
        return harness.request(svc.port, method, path, body=body, headers=headers,
                               timeout=scaled(10))

    def service(self, origins, **env):
        self.r = self.redis()
        env = dict(env, CORS_ORIGINS=origins, AUTH_URI=OWN + '/signin')
        return self.entityd(redis=self.r, env=env)

    def commands(self):
        stats = harness.commandstats(self.r.cli('INFO', 'commandstats').decode())
        return {k: v for k, v in stats.items() if k.split('|')[0] not in NOT_THE_REQUESTS}

    def assertNotOriginRefused(self, resp, what):
        st, _, body = resp
        self.assertNotEqual(st, 403, '%s: %r' % (what, body))

    # ----------------------------------------------------------------------------------------
    # headers

    def test_listed_origin_gets_credentials(self):
        svc = self.service('https://other.example, ' + APP)
        st, h, _ = self.req(svc, 'GET', '/api/auth/message', headers={'Origin': APP})
        self.assertEqual(st, 200)
        self.assertEqual(h['access-control-allow-origin'], APP)
        self.assertEqual(h['access-control-allow-credentials'], 'true')
        self.assertEqual(h['vary'], 'Origin')
        # The preflight: Authorization allowed beside what was allowed before, with credentials.
        st, h, body = self.req(svc, 'OPTIONS', '/api/entities', headers=self.PREFLIGHT)
        self.assertEqual(st, 204, body)
        self.assertEqual(h['access-control-allow-origin'], APP)
        self.assertEqual(h['access-control-allow-credentials'], 'true')
        self.assertEqual(h['access-control-allow-methods'], 'GET, POST')
        allowed = [x.strip().lower() for x in h['access-control-allow-headers'].split(',')]
        for name in ('authorization', 'content-type', 'x-request-id', 'traceparent'):
            self.assertIn(name, allowed)
        # Errors too, so that a page can read why.
        st, h, _ = self.req(svc, 'GET', '/api/nothing', headers={'Origin': APP})
        self.assertEqual(st, 404)
        self.assertEqual(h['access-control-allow-credentials'], 'true')

    def test_unlisted_origin_gets_none(self):
        svc = self.service(APP)
        for origin in ('https://evil.example', APP + '.evil', 'null', APP + ':443'):
            st, h, _ = self.req(svc, 'GET', '/api/auth/message', headers={'Origin': origin})
            self.assertEqual(st, 200)
            self.assertNotIn('access-control-allow-origin', h, origin)
            self.assertNotIn('access-control-allow-credentials', h, origin)
            st, h, _ = self.req(svc, 'OPTIONS', '/api/entities',
                                headers=dict(self.PREFLIGHT, Origin=origin))
            self.assertEqual(st, 204)
            self.assertNotIn('access-control-allow-credentials', h, origin)

    def test_wildcard_never_credentials(self):
        svc = self.service('*')
        st, h, _ = self.req(svc, 'GET', '/api/auth/message', headers={'Origin': APP})
        self.assertEqual(st, 200)
        self.assertEqual(h['access-control-allow-origin'], '*')
        self.assertNotIn('access-control-allow-credentials', h)
        st, h, _ = self.req(svc, 'OPTIONS', '/api/entities', headers=self.PREFLIGHT)
        self.assertEqual(st, 204)
        self.assertEqual(h['access-control-allow-origin'], '*')
        self.assertNotIn('access-control-allow-credentials', h)
        self.assertIn('authorization', h['access-control-allow-headers'].lower())

    # ----------------------------------------------------------------------------------------
    # the Origin check

    def test_cookie_write_needs_listed_or_own_origin(self):
        svc = self.service(APP, SWEEP_PAUSED='true')
        w = harness.Wallet.random(1)[0]
        eid = 'c-' + str(uuid.uuid4())
        writes = (('POST', '/api/entities', entity_body(w.address)),
                  ('DELETE', '/api/entities/' + eid, None),
                  ('POST', '/api/entities/%s/admins' % eid, {'address': w.address}))
        bad = ({'Origin': 'https://evil.example'}, {'Origin': APP + '.evil'},
               {'Origin': 'null'}, {'Origin': 'http://api.example'}, {})
        keys = sorted(self.r.cli('KEYS', '*'))  # what the service wrote when it started
        self.r.cli('CONFIG', 'RESETSTAT')
        for method, path, body in writes:
            for h in bad:
                resp = self.req(svc, method, path, body, headers=dict(h, Cookie=COOKIE))
                self.assertEnvelope(resp, 403, 'forbidden')
                self.assertIn('origin', resp[2]['error']['message'].lower())
                # The grant is still there for a listed origin that is not this one: none here.
                self.assertNotIn('access-control-allow-credentials', resp[1])
        # A cut or overlong cookie is still a cookie.
        resp = self.req(svc, 'POST', '/api/entities', entity_body(w.address),
                        headers={'Cookie': 'entityd_session=' + 'x' * 300,
                                 'Origin': 'https://evil.example'})
        self.assertEnvelope(resp, 403, 'forbidden')
        # Nothing spent: not one command reached Redis, and nothing was written.
        self.assertEqual(self.commands(), {})
        self.assertEqual(sorted(self.r.cli('KEYS', '*')), keys)

        # A listed origin, the service's own: past the check, to whatever auth does.
        for origin in (APP, OWN):
            for method, path, body in writes:
                resp = self.req(svc, method, path, body,
                                headers={'Cookie': COOKIE, 'Origin': origin})
                self.assertNotOriginRefused(resp, '%s %s from %s' % (method, path, origin))
        # GET is not concerned, from anywhere or nowhere.
        for h in ({'Origin': 'https://evil.example'}, {}):
            resp = self.req(svc, 'GET', '/api/entities/' + eid, headers=dict(h, Cookie=COOKIE))
            self.assertNotOriginRefused(resp, 'GET %r' % h)
        # Another credential beside the cookie: not the cookie's request.
        resp = self.req(svc, 'POST', '/api/entities', entity_body(w.address),
                        headers={'Cookie': COOKIE, 'Origin': 'https://evil.example',
                                 'Authorization': BEARER})
        self.assertNotOriginRefused(resp, 'Bearer')
        msg, _ = harness.current_message(svc.port)
        query = harness.auth_query(*w.sign(msg))
        resp = self.req(svc, 'POST', '/api/entities?' + query, entity_body(w.address),
                        headers={'Cookie': COOKIE, 'Origin': 'https://evil.example'})
        self.assertNotOriginRefused(resp, 'signature')
        # Without the cookie the same signature writes, from any origin.
        st, _, body = self.req(svc, 'POST', '/api/entities?' + query, entity_body(w.address),
                               headers={'Origin': 'https://evil.example'})
        self.assertEqual(st, 201, body)
        self.assertNotEqual(self.commands(), {})  # the counters above do see the service's

    def test_own_origin_from_auth_domain(self):
        # Without AUTH_URI, the sign-in message's https://AUTH_DOMAIN is the service's own; and
        # with CORS_ORIGINS unset only that passes.
        self.r = self.redis()
        svc = self.entityd(redis=self.r, env={'AUTH_DOMAIN': 'api.example'})
        w = harness.Wallet.random(1)[0]
        resp = self.req(svc, 'POST', '/api/entities', entity_body(w.address),
                        headers={'Cookie': COOKIE, 'Origin': OWN})
        self.assertNotOriginRefused(resp, 'own origin')
        resp = self.req(svc, 'POST', '/api/entities', entity_body(w.address),
                        headers={'Cookie': COOKIE, 'Origin': APP})
        self.assertEnvelope(resp, 403, 'forbidden')

    def test_wildcard_is_no_list_for_cookies(self):
        svc = self.service('*')
        w = harness.Wallet.random(1)[0]
        resp = self.req(svc, 'POST', '/api/entities', entity_body(w.address),
                        headers={'Cookie': COOKIE, 'Origin': APP})
        self.assertEnvelope(resp, 403, 'forbidden')
        resp = self.req(svc, 'POST', '/api/entities', entity_body(w.address),
                        headers={'Cookie': COOKIE, 'Origin': OWN})
        self.assertNotOriginRefused(resp, 'own origin')

    def test_no_credential_in_logs(self):
        svc = self.service(APP, LOG_LEVEL='debug')
        w = harness.Wallet.random(1)[0]
        msg, _ = harness.current_message(svc.port)
        addr, sig = w.sign(msg)
        for origin in (APP, 'https://evil.example'):
            self.req(svc, 'POST', '/api/entities', entity_body(w.address),
                     headers={'Cookie': COOKIE, 'Origin': origin})
            self.req(svc, 'POST', '/api/entities', entity_body(w.address),
                     headers={'Authorization': BEARER, 'Origin': origin})
            self.req(svc, 'POST', '/api/entities?' + harness.auth_query(addr, sig),
                     entity_body(w.address), headers={'Origin': origin})
        self.assertEqual(svc.stop(), 0)
        text = svc.stdout() + '\n' + svc.stderr()
        self.assertGreater(len(text), 0)
        self.assertEqual(logscan.scan_text(text), [])
        # The scan itself finds what it looks for.
        self.assertEqual(logscan.scan_text('x ' + COOKIE + '\n' + BEARER + '\n' + sig),
                         [(1, 'token'), (2, 'token'), (3, 'signature')])


if __name__ == '__main__':
    harness.main()
