"""Event streams (CONTRACT section 14, "Streams"): GET /api/entities/{id}/events/stream for
owners and admins, read with the `eventsource` npm package (tests/node/sse_read.cjs) as clients
read them and with raw sockets for the hostile cases: live delivery of an award's events,
resume with Last-Event-ID or ?after= with nothing missed or repeated, a gap for an unknown id,
heartbeats, a client that never reads closed at its bound while the others go on, the limits
(503, 429), a stream ended within 5 s of its caller losing the role, its session ending, its
API key deleted or its entity deleted, a reset mid-stream, and many streams on one entity each
getting one event."""

import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from support.base import reset_close  # noqa: E402
from support.sessions import make_session  # noqa: E402

NODE_DIR = os.path.join(harness.REPO, 'tests', 'node')
READER = os.path.join(NODE_DIR, 'sse_read.cjs')
NODE = shutil.which('node') or '/usr/bin/node'


class Reader:
    """An `eventsource` client (tests/node/sse_read.cjs) in its own process, stopped by PID."""

    def __init__(self, url, headers=None, count=1, timeout=None, types=()):
        self.proc = subprocess.Popen([NODE, READER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=NODE_DIR)
        self.proc.stdin.write(json.dumps({
            'url': url, 'headers': headers or {}, 'count': count, 'types': list(types),
            'timeoutMs': int((timeout or scaled(20)) * 1000), 'reconnect': False}))
        self.proc.stdin.close()

    def line(self):
        ln = self.proc.stdout.readline()
        if not ln:
            raise AssertionError('reader ended: %s' % self.proc.stderr.read()[-2000:])
        return json.loads(ln)

    def wait_open(self):
        first = self.line()
        assert first.get('open'), first
        return self

    def events(self):
        """Every event until it is done (or fails)."""
        out = []
        while True:
            o = self.line()
            if 'done' in o or 'error' in o:
                self.result = o
                return out
            out.append(o)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
from harness import metric, scaled  # noqa: E402



class Sse:
    """A stream read over a raw socket: the head, then events as the server sends them."""

    def __init__(self, port, path, headers=None, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(scaled(10))
        self.sock.connect(('127.0.0.1', port))
        lines = ['GET %s HTTP/1.1' % path, 'Host: 127.0.0.1']
        lines += ['%s: %s' % kv for kv in (headers or {}).items()]
        self.sock.sendall(('\r\n'.join(lines) + '\r\n\r\n').encode())
        self.buf = b''
        self.eof = False
        self.status, self.head = None, {}

    def fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout('deadline passed')
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b''
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_head(self, timeout=None):
        deadline = time.monotonic() + (timeout or scaled(10))
        while b'\r\n\r\n' not in self.buf:
            if not self.fill(deadline):
                raise ConnectionError('closed before the head: %r' % self.buf)
        head, self.buf = self.buf.split(b'\r\n\r\n', 1)
        lines = head.decode().split('\r\n')
        self.status = int(lines[0].split()[1])
        self.head = {k.lower(): v.strip() for k, v in (ln.split(':', 1) for ln in lines[1:])}
        return self.status

    def body_json(self, timeout=None):
        n = int(self.head.get('content-length', '0'))
        deadline = time.monotonic() + (timeout or scaled(10))
        while len(self.buf) < n and self.fill(deadline):
            pass
        return json.loads(self.buf[:n])

    def next_block(self, timeout=None):
        """The next block up to a blank line (an event or a comment), or None at the end."""
        deadline = time.monotonic() + (timeout or scaled(10))
        while b'\n\n' not in self.buf:
            if self.eof or not self.fill(deadline):
                return None
        block, self.buf = self.buf.split(b'\n\n', 1)
        return block.decode()

    def next_event(self, timeout=None):
        """The next event as {id, event, data} (comments skipped), or None at the end."""
        deadline = time.monotonic() + (timeout or scaled(10))
        while True:
            block = self.next_block(max(0.01, deadline - time.monotonic()))
            if block is None:
                return None
            ev = {}
            for line in block.split('\n'):
                if line.startswith(':'):
                    continue
                k, _, v = line.partition(': ')
                ev[k] = v
            if ev:
                if 'data' in ev:
                    ev['data'] = json.loads(ev['data'])
                return ev

    def ended(self, timeout):
        """True when the server closes the stream within timeout (what it sent is read)."""
        deadline = time.monotonic() + timeout
        try:
            while self.fill(deadline):
                pass
        except socket.timeout:
            return False
        except OSError:
            return True
        return True

    def close(self):
        self.sock.close()


class StreamsBase(harness.ServiceTestCase):
    """One instance with small settings, and the helpers every stream test uses."""

    @classmethod
    def setUpClass(cls):
        cls.pool = harness.Wallet.random(80)
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env={
            'STREAM_HEARTBEAT_SECONDS': '1', 'STREAM_BUFFER_BYTES': '16384',
            'IDLE_TIMEOUT_MS': '300', 'HEADER_TIMEOUT_MS': '2000',
            'CORS_ORIGINS': 'https://app.example',
            'STREAMS_PER_CALLER': '3', 'WRITE_BUFFER_BYTES': '8192'})
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])

    def auth(self, w):
        return self.signer.query(w)

    def req(self, method, path, body=None, headers=None):
        return harness.request(self.port, method, path, body=body, headers=headers,
                               timeout=scaled(10))

    def entity(self):
        owner, admin, member, stranger = (self.pool.pop() for _ in range(4))
        body = {'name': 'Stream %s' % uuid.uuid4().hex[:8], 'description': '',
                'ownerAddresses': [owner.address], 'twitter': '', 'discord': '', 'website': '',
                'imageUrl': '', 'public': True}
        eid = self.assertOk(self.req('POST', '/api/entities?' + self.auth(owner), body),
                            201)['data']['id']
        self.assertOk(self.req('POST', '/api/entities/%s/admins?%s' % (eid, self.auth(owner)),
                               {'addresses': [admin.address]}))
        return eid, owner, admin, member, stranger

    def add_member(self, eid, owner, member):
        self.assertOk(self.req('POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(owner)),
                               {'addresses': [member.address], 'Chain': 'eth'}))

    def open(self, eid, w, after=None, headers=None, expect=200, **kw):
        path = '/api/entities/%s/events/stream?%s' % (eid, self.auth(w) if w else '')
        if after:
            path += '&after=' + after
        s = Sse(self.port, path, headers, **kw)
        self.assertEqual(s.read_head(), expect)
        return s

    def kept(self, eid):
        return [i.decode() for i, _ in self.r.cli('XRANGE', 'ent:{%s}:events' % eid, '-', '+')]

    def url(self, eid, w=None, after=None):
        u = 'http://127.0.0.1:%d/api/entities/%s/events/stream' % (self.port, eid)
        q = [self.auth(w)] if w else []
        if after:
            q.append('after=' + after)
        return u + ('?' + '&'.join(q) if q else '')

    def award(self, eid, by, member):
        self.assertOk(self.req('POST', '/api/entities/%s/contributions?%s' % (eid, self.auth(by)),
                               {'member': member.address, 'xp': 10, 'title': 'Fixed a bug'}),
                      201)


class StreamsTest(StreamsBase):
    # ---- tests ----

    def test_eventsource_live_award_then_resume(self):
        eid, owner, admin, member, _ = self.entity()
        self.add_member(eid, owner, member)
        token = make_session(self.r, admin, 600000)
        types = ['contribution.added', 'level.reached', 'member.added']
        rd = Reader(self.url(eid), {'Authorization': 'Bearer ' + token}, count=1,
                    types=types).wait_open()
        try:
            self.award(eid, owner, member)
            got = rd.events()
        finally:
            rd.stop()
        self.assertEqual(rd.result, {'done': True})
        ids = self.kept(eid)
        self.assertEqual(got[0]['type'], 'contribution.added')
        self.assertEqual(got[0]['id'], ids[-1] if len(ids) else None)
        # more happen while it is away; it comes back with Last-Event-ID
        before = len(ids)
        self.award(eid, owner, member)
        self.award(eid, admin, member)
        ids = self.kept(eid)
        rd = Reader(self.url(eid, owner), {'Last-Event-ID': got[0]['id']},
                    count=len(ids) - before, types=types)
        try:
            again = rd.events()
        finally:
            rd.stop()
        self.assertEqual(again[0], {'open': True})
        self.assertEqual([e['id'] for e in again[1:]], ids[before:])

    def test_session_end_and_key_delete_end_streams(self):
        eid, owner, admin, _, _ = self.entity()
        token = make_session(self.r, admin, 600000)
        by_session = self.open(eid, None, headers={'Authorization': 'Bearer ' + token})
        st, _, b = self.req('POST', '/api/entities/%s/api-keys?%s' % (eid, self.auth(owner)),
                            {'name': 'bot:1', 'scope': 'admin'})
        self.assertEqual(st, 201, b)
        key, kid = b['data']['key'], b['data']['id']
        by_key = self.open(eid, None, headers={'Authorization': 'Bearer ' + key})
        # a session that expires: its stream ends too
        short = make_session(self.r, owner, int(scaled(2) * 1000))
        by_short = self.open(eid, None, headers={'Authorization': 'Bearer ' + short})
        self.assertOk(self.req('DELETE', '/api/auth/session',
                               headers={'Authorization': 'Bearer ' + token}))
        self.assertOk(self.req('DELETE', '/api/entities/%s/api-keys/%s?%s' %
                               (eid, kid, self.auth(owner))))
        t0 = time.monotonic()
        for s in (by_session, by_key):
            self.assertTrue(s.ended(scaled(8)))
        self.assertLess(time.monotonic() - t0, scaled(5) + 1)
        self.assertTrue(by_short.ended(scaled(10)))

    def test_head_and_live_events(self):
        eid, owner, admin, member, _ = self.entity()
        s = self.open(eid, admin)
        self.assertEqual(s.head['content-type'], 'text/event-stream')
        self.assertEqual(s.head['cache-control'], 'no-cache')
        self.assertEqual(s.head['x-accel-buffering'], 'no')
        self.assertNotIn('content-length', s.head)
        self.add_member(eid, owner, member)
        ev = s.next_event(scaled(5))
        self.assertEqual(ev['event'], 'member.added')
        self.assertEqual(ev['id'], self.kept(eid)[-1])
        # the same JSON as /events' item
        items = self.assertOk(self.req('GET', '/api/entities/%s/events?%s' %
                                       (eid, self.auth(owner))))['data']
        self.assertEqual(ev['data'], items[-1])
        s.close()

    def test_resume_nothing_missed_or_repeated(self):
        eid, owner, admin, _, _ = self.entity()
        for _ in range(5):
            self.add_member(eid, owner, self.pool.pop())
        ids = self.kept(eid)
        s = self.open(eid, owner, headers={'Last-Event-ID': ids[1]})
        got = [s.next_event(scaled(5))['id'] for _ in range(len(ids) - 2)]
        self.assertEqual(got, ids[2:])
        # live after the backlog, once each
        self.add_member(eid, owner, self.pool.pop())
        ev = s.next_event(scaled(5))
        self.assertEqual(ev['id'], self.kept(eid)[-1])
        s.close()
        # ?after= as well
        s = self.open(eid, owner, after=ids[3])
        got = [s.next_event(scaled(5))['id'] for _ in range(len(ids) - 3)]
        self.assertEqual(got, self.kept(eid)[4:])
        s.close()

    def test_resume_while_events_keep_coming(self):
        """The hand-over from the stream's own reads to the group's, under writes."""
        eid, owner, admin, _, _ = self.entity()
        self.add_member(eid, owner, self.pool.pop())
        first = self.kept(eid)[0]
        live = self.open(eid, admin)  # the group exists and reads while the others join
        done = threading.Event()

        def write():
            for _ in range(30):
                self.add_member(eid, owner, harness.Wallet.random(1)[0])
            done.set()

        t = threading.Thread(target=write)
        t.start()
        late = []
        try:
            for i in range(3):
                time.sleep(0.05 * i)
                late.append(self.open(eid, owner, headers={'Last-Event-ID': first}))
        finally:
            t.join(scaled(60))
        self.assertTrue(done.is_set())
        ids = self.kept(eid)
        for s in late:
            got = []
            while not got or got[-1] != ids[-1]:
                ev = s.next_event(scaled(10))
                self.assertIsNotNone(ev, got)
                got.append(ev['id'])
            self.assertEqual(got, ids[1:])
            s.close()
        live.close()

    def test_unknown_id_resumes_from_the_oldest_after_a_gap(self):
        eid, owner, admin, _, _ = self.entity()
        self.add_member(eid, owner, self.pool.pop())
        ids = self.kept(eid)
        s = self.open(eid, owner, headers={'Last-Event-ID': '1-1'})
        gap = s.next_event(scaled(5))
        self.assertEqual(gap['event'], 'gap')
        got = [s.next_event(scaled(5))['id'] for _ in ids]
        self.assertEqual(got, ids)
        s.close()

    def test_browser_cookie_and_cors(self):
        eid, owner, admin, _, _ = self.entity()
        token = make_session(self.r, admin, 600000)
        s = self.open(eid, None, headers={'Cookie': 'entityd_session=' + token,
                                          'Origin': 'https://app.example'})
        self.assertEqual(s.head['access-control-allow-origin'], 'https://app.example')
        self.assertEqual(s.head['access-control-allow-credentials'], 'true')
        s.close()
        # a page of an unlisted origin gets no grant: its browser keeps the stream from it
        s = self.open(eid, None, headers={'Cookie': 'entityd_session=' + token,
                                          'Origin': 'https://evil.example'})
        self.assertNotIn('access-control-allow-origin', s.head)
        s.close()

    def test_heartbeat(self):
        eid, owner, admin, _, _ = self.entity()
        s = self.open(eid, admin)
        # a comment a second, and the idle deadline (300 ms here) never ends a stream
        for _ in range(3):
            self.assertEqual(s.next_block(scaled(4)), ':')
        self.assertFalse(s.eof)
        s.close()

    def test_refusals(self):
        eid, owner, admin, member, stranger = self.entity()
        self.add_member(eid, owner, member)
        s = self.open(eid, member, expect=403)
        s.close()
        s = self.open(eid, stranger, expect=403)
        s.close()
        s = Sse(self.port, '/api/entities/%s/events/stream' % eid)
        self.assertEqual(s.read_head(), 400)
        s.close()
        s = self.open(eid, owner, after='nope', expect=400)
        s.close()

    def test_per_caller_limit(self):
        eid, owner, admin, _, _ = self.entity()
        open_ = [self.open(eid, admin) for _ in range(3)]
        s = self.open(eid, admin, expect=429)
        s.close()
        open_.pop().close()
        # the closed one is counted off once its close is seen
        deadline = time.monotonic() + scaled(5)
        while True:
            s = Sse(self.port, '/api/entities/%s/events/stream?%s' % (eid, self.auth(admin)))
            if s.read_head() == 200 or time.monotonic() > deadline:
                break
            s.close()
            time.sleep(0.05)
        self.assertEqual(s.status, 200)
        for x in open_ + [s]:
            x.close()

    def test_role_loss_ends_the_stream(self):
        eid, owner, admin, _, _ = self.entity()
        s = self.open(eid, admin)
        self.assertOk(self.req('DELETE', '/api/entities/%s/admins/%s?%s' %
                               (eid, admin.address, self.auth(owner))))
        t0 = time.monotonic()
        self.assertTrue(s.ended(scaled(8)))
        self.assertLess(time.monotonic() - t0, scaled(5) + 1)

    def test_entity_delete_ends_the_stream(self):
        eid, owner, admin, _, _ = self.entity()
        s = self.open(eid, owner)
        self.assertOk(self.req('DELETE', '/api/entities/%s?%s' % (eid, self.auth(owner))))
        self.assertTrue(s.ended(scaled(8)))

class StreamsScaleTest(harness.ServiceTestCase):
    """An instance of its own: many streams on one entity, the instance's limit, the drain."""

    MANY = 2000

    @classmethod
    def setUpClass(cls):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard, cls.MANY * 2 + 512)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        cls.pool = harness.Wallet.random(6)
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env={
            'MAX_STREAMS': str(cls.MANY), 'STREAMS_PER_CALLER': str(cls.MANY)})
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])
        cls.owner = cls.pool.pop()
        body = {'name': 'Many', 'description': '', 'ownerAddresses': [cls.owner.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'public': True}
        st, _, b = harness.request(cls.port, 'POST', '/api/entities?' +
                                   cls.signer.query(cls.owner), body)
        assert st == 201, (st, b)
        cls.eid = b['data']['id']

    def path(self):
        return '/api/entities/%s/events/stream?%s' % (self.eid, self.signer.query(self.owner))

    def test_many_streams_one_event_each_then_the_limit(self):
        if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < self.MANY * 2 + 256:
            self.skipTest('the open-file limit is too low for %d streams' % self.MANY)
        streams = []
        try:
            # the signature checked once (kept), then the streams opened a batch at a time
            self.assertEqual(harness.request(self.port, 'GET', '/api/entities/%s/events?%s' % (
                self.eid, self.signer.query(self.owner)))[0], 200)
            for _ in range(self.MANY // 100):
                batch = [Sse(self.port, self.path()) for _ in range(100)]
                streams += batch
                for s in batch:
                    self.assertEqual(s.read_head(scaled(30)), 200, s.buf[:300])
            self.assertEqual(metric(self.svc, 'entityd_streams_open', 0), self.MANY)
            # past MAX_STREAMS: 503
            extra = Sse(self.port, self.path())
            self.assertEqual(extra.read_head(), 503)
            extra.close()
            member = self.pool.pop()
            st, _, b = harness.request(self.port, 'POST', '/api/entities/%s/force-add?%s' % (
                self.eid, self.signer.query(self.owner)),
                {'addresses': [member.address], 'Chain': 'eth'})
            self.assertEqual(st, 200, b)
            want = [i.decode() for i, _ in self.r.cli('XRANGE', 'ent:{%s}:events' % self.eid,
                                                      '-', '+')][-1]
            for s in streams:
                ev = s.next_event(scaled(30))
                self.assertEqual((ev['event'], ev['id']), ('member.added', want))
        finally:
            for s in streams:
                s.close()
        harness.wait_for(lambda: metric(self.svc, 'entityd_streams_open', 0) == 0, scaled(10),
                         what='every stream counted off')

    def test_drain_ends_streams_promptly(self):
        svc = self.class_entityd(redis=self.r, env={'SHUTDOWN_TIMEOUT_MS': '30000'})
        signer = harness.Signer(harness.current_message(svc.port)[0])
        s = Sse(svc.port, '/api/entities/%s/events/stream?%s' % (self.eid,
                                                                 signer.query(self.owner)))
        self.assertEqual(s.read_head(), 200)
        t0 = time.monotonic()
        svc.send_signal(15)
        self.assertTrue(s.ended(scaled(5)))
        self.assertEqual(svc.wait(scaled(10)), 0)
        self.assertLess(time.monotonic() - t0, scaled(5))
        s.close()


if __name__ == '__main__':
    harness.main()
