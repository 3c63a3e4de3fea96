"""A real browser against entityd (CONTRACT section 13, "Browsers"): headless Chromium loads a
page from a static server on a loopback port, entityd listens on another (a different origin,
the same site), and the page's script writes what its fetch() calls saw into the DOM, which
--dump-dom prints. From the origin listed in CORS_ORIGINS, credentialed requests are readable
and preflights let the Authorization header through; a session made by POST /api/auth/session
then writes with the cookie alone. From an unlisted origin the same cookie write is answered
403 and nothing is written, and the page cannot read the answer.

Chromium is Debian's `chromium` (scripts/lib.sh installs it); without it the file skips."""

import html
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import scaled  # noqa: E402

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>entityd</title></head>
<body><pre id="out"></pre><script>
const P = JSON.parse(decodeURIComponent(location.hash.slice(1)));
const out = {};
async function call(name, path, init) {
  try {
    const r = await fetch(P.api + path, Object.assign({credentials: 'include'}, init));
    const text = await r.text();
    let body = null;
    try { body = JSON.parse(text); } catch (e) { body = text; }
    // The token stays out of the DOM (and so out of the test's output): only that it came.
    if (body && body.data && typeof body.data.token === 'string') {
      body.data.token = body.data.token.slice(0, 3) + '...';
    }
    out[name] = {status: r.status, requestId: r.headers.get('X-Request-Id'), body: body};
  } catch (e) {
    out[name] = {error: String(e)};  // the browser refused to let the page read the answer
  }
}
const json = (body, extra) => ({method: 'POST', body: JSON.stringify(body),
  headers: Object.assign({'Content-Type': 'application/json'}, extra || {})});
async function run() {
  if (P.mode === 'listed') {
    await call('message', '/api/auth/message', {});
    await call('bearer', '/api/entities', json(P.entity, {'Authorization': P.bearer}));
  } else if (P.mode === 'session') {
    await call('session', '/api/auth/session',
               json({address: P.address, signature: P.signature}));
    await call('create', '/api/entities', json(P.entity));
  } else if (P.mode === 'unlisted') {
    await call('json', '/api/entities', json(P.entity));  // preflighted: never sent
    // A "simple" request needs no preflight, so the browser sends it with the cookie: only
    // the service's Origin check stands between it and a write.
    await call('text', '/api/entities', {method: 'POST', body: JSON.stringify(P.entity),
                                         headers: {'Content-Type': 'text/plain'}});
    await call('empty', '/api/entities', {method: 'POST'});
  }
}
run().catch((e) => { out.fatal = String(e); }).finally(() => {
  document.getElementById('out').textContent = JSON.stringify(out);
});
</script></body></html>
"""


class PageServer:
    """The page on http://127.0.0.1:<port>, from a thread of this process. `plant`, when set,
    is a cookie the page's answer sets: cookies are per host, not per port, so the browser then
    sends it to entityd as well (as a real session cookie would be)."""

    def __init__(self):
        owner = self
        self.plant = None

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = PAGE.encode()
                self.send_response(200)
                self.send_header('Content-Type', 'text/html; charset=utf-8')
                self.send_header('Content-Length', str(len(body)))
                self.send_header('Cache-Control', 'no-store')
                if owner.plant:
                    self.send_header('Set-Cookie', 'entityd_session=%s; Path=/; SameSite=Lax'
                                     % owner.plant)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.port = self.httpd.server_address[1]
        self.origin = 'http://127.0.0.1:%d' % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(scaled(10))


def entity_body(owner):
    return {'name': 'Guild %s' % uuid.uuid4().hex[:8], 'description': '',
            'ownerAddresses': [owner], 'twitter': '', 'discord': '', 'website': '',
            'imageUrl': ''}


@harness.unittest.skipUnless(CHROMIUM, 'chromium is not installed (scripts/lib.sh installs it)')
class BrowserTest(harness.ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.listed = PageServer()
        self.unlisted = PageServer()
        self.profile = harness.tmpdir('chromium-')
        self.r = self.redis()
        # --dev: the session cookie is not Secure, so it rides over plain loopback HTTP.
        self.svc = self.entityd(redis=self.r, args=['--dev'],
                                env={'CORS_ORIGINS': self.listed.origin})
        self.api = 'http://127.0.0.1:%d' % self.svc.port

    def tearDown(self):
        self.listed.close()
        self.unlisted.close()
        super().tearDown()

    def browse(self, page, params):
        """Loads the page in headless Chromium (one profile per test, so cookies carry over
        between calls) and returns what its script wrote."""
        params = dict(params, api=self.api)
        url = '%s/page#%s' % (page.origin, urllib.parse.quote(json.dumps(params)))
        args = [CHROMIUM, '--headless=new', '--no-sandbox', '--disable-gpu',
                '--no-first-run', '--no-default-browser-check', '--disable-extensions',
                '--user-data-dir=' + self.profile, '--virtual-time-budget=30000',
                '--dump-dom', url]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            dom, _ = proc.communicate(timeout=scaled(120))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own group: the browser's children too
            proc.communicate()
            self.fail('chromium did not finish')
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        m = re.search(r'<pre id="out">(.*?)</pre>', dom.decode('utf-8', 'replace'), re.S)
        self.assertTrue(m and m.group(1), 'the page wrote nothing: %r' % dom[-2000:])
        out = json.loads(html.unescape(m.group(1)))
        self.assertNotIn('fatal', out)
        return out

    def has_sessions(self):
        """POST /api/auth/session exists (an empty body is a 400 then, and spends nothing)."""
        st, _, _ = self.svc.request('POST', '/api/auth/session', {})
        return st != 404

    def signed(self):
        w = harness.Wallet.random(1)[0]
        msg, _ = harness.current_message(self.svc.port)
        address, signature = w.sign(msg)
        return w, address, signature

    def test_listed_origin_reads_with_credentials(self):
        w = harness.Wallet.random(1)[0]
        out = self.browse(self.listed, {'mode': 'listed', 'entity': entity_body(w.address),
                                        'bearer': 'Bearer es_' + '0' * 72})
        # With credentials: 'include' the browser hands the page the answer only when it
        # names the origin and allows credentials.
        self.assertEqual(out['message'].get('status'), 200, out)
        self.assertTrue(out['message']['body']['data']['message'])
        self.assertTrue(out['message']['requestId'])  # an exposed header
        # The preflight let Authorization through: the page reads the service's own refusal
        # of that request (a token that is no live session: 401; before tokens were read, the
        # missing address: 400), not a network error.
        self.assertIn(out['bearer'].get('status'), (400, 401), out)
        self.assertIs(out['bearer']['body']['success'], False)

    def test_session_cookie_writes(self):
        if not self.has_sessions():
            self.skipTest('POST /api/auth/session is not here yet (404): the session endpoints '
                          'come with their own change; this part runs once they are in')
        w, address, signature = self.signed()
        out = self.browse(self.listed, {'mode': 'session', 'address': address,
                                        'signature': signature,
                                        'entity': entity_body(w.address)})
        self.assertEqual(out['session'].get('status'), 201, out)
        self.assertEqual(out['session']['body']['data']['address'], w.address.lower())
        # The cookie alone: no address or signature in the URL, no Authorization header.
        self.assertEqual(out['create'].get('status'), 201, out)
        eid = out['create']['body']['data']['id']
        st, _, body = self.svc.request('GET', '/api/entities/%s?address=%s' % (eid, address))
        self.assertEqual(st, 200, body)
        # The same browser, now holding the cookie, on an unlisted origin's page.
        self.assert_unlisted_refused(w)

    def test_unlisted_origin_refused(self):
        w, address, signature = self.signed()
        token = None
        if self.has_sessions():
            st, _, body = self.svc.request('POST', '/api/auth/session',
                                           {'address': address, 'signature': signature})
            self.assertEqual(st, 201, body)
            token = body['data']['token']
        # Without the session endpoints, a cookie shaped like a token: the Origin check comes
        # before anything looks at it.
        self.unlisted.plant = token or 'es_' + w.address[2:].lower() + uuid.uuid4().hex
        self.assert_unlisted_refused(w)

    def assert_unlisted_refused(self, w):
        keys = sorted(self.r.cli('KEYS', '*'))
        before = len(self.refusals())
        out = self.browse(self.unlisted, {'mode': 'unlisted', 'entity': entity_body(w.address)})
        # The page reads none of the answers: no grant for its origin.
        for name in ('json', 'text', 'empty'):
            self.assertIn('error', out[name], out)
        # The two requests that needed no preflight did reach the service and were refused
        # there, before anything was spent; the preflighted one was never sent.
        harness.wait_for(lambda: len(self.refusals()) >= before + 2, scaled(10),
                         what='the two refusals logged')
        self.assertEqual(len(self.refusals()), before + 2)
        self.assertEqual(sorted(self.r.cli('KEYS', '*')), keys)

    def refusals(self):
        return [rec for rec in self.svc.logs()
                if rec.get('route') == '/api/entities' and rec.get('method') == 'POST'
                and rec.get('status') == 403]


if __name__ == '__main__':
    harness.main()
