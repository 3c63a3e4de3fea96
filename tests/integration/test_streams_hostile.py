"""Event streams against hostile clients (CONTRACT section 14; run under the sanitizers, suite
'hostile'): a client that never reads is closed at STREAM_BUFFER_BYTES while the others go on,
a client that resets mid-stream or half-closes is counted off once and the service goes on, a
client that sends more after its request is not read from; and all of these at once among
hundreds of streams of one entity, whose sends the send threads share."""

import os
import resource
import selectors
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_streams as ts  # noqa: E402
from harness import metric, scaled  # noqa: E402
from support.base import reset_close  # noqa: E402


class StreamsHostileTest(ts.StreamsBase):

    def test_client_that_never_reads_is_closed_at_its_bound(self):
        eid, owner, admin, _, _ = self.entity()
        slow = self.open(eid, owner, rcvbuf=4096)
        fast = self.open(eid, admin)
        seen = []

        def read_fast():
            while True:
                ev = fast.next_event(scaled(20))
                if ev is None or ev.get('event') == 'member.added':
                    seen.append(ev)
                if ev is None or len(seen) >= 40:
                    return

        t = threading.Thread(target=read_fast)
        t.start()
        for _ in range(40):  # a few KiB each: the slow one's socket buffers and bound fill
            self.assertOk(self.req(
                'POST', '/api/entities/%s/force-add?%s' % (eid, self.auth(owner)),
                {'addresses': [w.address for w in harness.Wallet.random(20)], 'Chain': 'eth'}))
        t.join(scaled(30))
        self.assertEqual(len(seen), 40)
        self.assertNotIn(None, seen)
        self.assertTrue(slow.ended(scaled(10)))
        fast.close()

    def test_reset_mid_stream(self):
        eid, owner, admin, _, _ = self.entity()
        before = metric(self.svc, 'entityd_streams_open', 0)
        s = self.open(eid, owner)
        reset_close(s.sock)
        self.add_member(eid, owner, self.pool.pop())
        # the service is fine and the stream is counted off
        self.assertOk(self.req('GET', '/api/entities/%s/events?%s' % (eid, self.auth(owner))))
        harness.wait_for(lambda: metric(self.svc, 'entityd_streams_open', 0) == before,
                         scaled(5), what='the reset stream gone')


    def test_half_close_and_garbage_after_the_request(self):
        eid, owner, admin, _, _ = self.entity()
        before = metric(self.svc, 'entityd_streams_open', 0)
        s = self.open(eid, owner)
        s.sock.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n' * 50)  # never read: the stream's
        g = self.open(eid, admin)
        g.sock.shutdown(ts.socket.SHUT_WR)
        self.assertTrue(g.ended(scaled(5)))
        self.add_member(eid, owner, self.pool.pop())
        self.assertEqual(s.next_event(scaled(5))['event'], 'member.added')
        s.close()
        harness.wait_for(lambda: metric(self.svc, 'entityd_streams_open', 0) == before,
                         scaled(5), what='both streams counted off')


class SharedFanoutHostileTest(harness.ServiceTestCase):
    """Hundreds of streams of one entity, their sends shared by the loop and two threads
    (STREAM_SEND_THREADS, net/sendpool.c), while a fifth never read and a fifth reset mid-run:
    every reader gets every event once and in order, the others end, none is left counted."""

    READERS, SILENT, RESETTERS, EVENTS = 360, 80, 80, 40

    @classmethod
    def setUpClass(cls):
        many = cls.READERS + cls.SILENT + cls.RESETTERS
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard, many * 2 + 512)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        cls.pool = harness.Wallet.random(4)
        cls.r = cls.class_redis()
        cls.svc = cls.class_entityd(redis=cls.r, env={
            'STREAM_SEND_THREADS': '2', 'STREAM_BUFFER_BYTES': '16384',
            'WRITE_BUFFER_BYTES': '8192',
            'MAX_STREAMS': str(many), 'STREAMS_PER_CALLER': str(many)})
        cls.port = cls.svc.port
        cls.signer = harness.Signer(harness.current_message(cls.port)[0])
        cls.owner = cls.pool.pop()
        body = {'name': 'Shared', 'description': '', 'ownerAddresses': [cls.owner.address],
                'twitter': '', 'discord': '', 'website': '', 'imageUrl': '', 'public': True}
        st, _, b = harness.request(cls.port, 'POST', '/api/entities?' +
                                   cls.signer.query(cls.owner), body)
        assert st == 201, (st, b)
        cls.eid = b['data']['id']

    def open_many(self, n, **kw):
        path = '/api/entities/%s/events/stream?%s' % (self.eid, self.signer.query(self.owner))
        out = []
        for at in range(0, n, 100):
            batch = [ts.Sse(self.port, path, **kw) for _ in range(min(100, n - at))]
            for s in batch:
                self.assertEqual(s.read_head(scaled(30)), 200, s.buf[:300])
            out += batch
        return out

    @staticmethod
    def read_all(streams, want, timeout):
        """Reads every stream until each holds `want` member.added events, ends, or the time
        is up."""
        sel = selectors.DefaultSelector()
        for s in streams:
            s.sock.setblocking(False)
            sel.register(s.sock, selectors.EVENT_READ, s)
        left, deadline = len(streams), time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            for key, _ in sel.select(0.2):
                s = key.data
                try:
                    data = s.sock.recv(262144)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    data = b''
                s.buf += data
                if not data or s.buf.count(b'\nevent: member.added\n') >= want:
                    s.eof = not data
                    sel.unregister(s.sock)
                    left -= 1
        sel.close()

    @staticmethod
    def ids(s):
        return [b.split(b'\n', 1)[0][4:].decode() for b in s.buf.split(b'\n\n')
                if b.startswith(b'id: ') and b'\nevent: member.added\n' in b]

    def force_add(self, n):
        st, _, b = harness.request(self.port, 'POST', '/api/entities/%s/force-add?%s' % (
            self.eid, self.signer.query(self.owner)),
            {'addresses': [w.address for w in harness.Wallet.random(n)], 'Chain': 'eth'},
            timeout=scaled(10))
        self.assertEqual(st, 200, b)

    def test_readers_get_everything_while_others_stall_and_reset(self):
        harness.request(self.port, 'GET', '/api/entities/%s/events?%s' % (
            self.eid, self.signer.query(self.owner)))  # the signature kept once
        readers = self.open_many(self.READERS)
        silent = self.open_many(self.SILENT, rcvbuf=4096)
        resetters = self.open_many(self.RESETTERS)
        total = self.READERS + self.SILENT + self.RESETTERS
        self.assertEqual(metric(self.svc, 'entityd_streams_open', 0), total)
        reader = threading.Thread(target=self.read_all,
                                  args=(readers, self.EVENTS, scaled(60)))
        reader.start()
        try:
            for i in range(self.EVENTS):  # a few KiB each: the silent ones reach their bound
                if i == self.EVENTS // 3:
                    for s in resetters:
                        reset_close(s.sock)
                self.force_add(40)
            reader.join(scaled(70))
            self.assertFalse(reader.is_alive())
            want = [k.decode() for k, _ in self.r.cli(
                'XRANGE', 'ent:{%s}:events' % self.eid, '-', '+')][-self.EVENTS:]
            for s in readers:
                self.assertEqual(self.ids(s), want)
            for s in silent:
                self.assertTrue(s.ended(scaled(10)))
            self.assertEqual(metric(self.svc, 'entityd_streams_send_threads', 0), 2)
            self.assertGreater(metric(self.svc, 'entityd_streams_shared_fanouts_total', 0), 0)
        finally:
            for s in readers + silent:
                s.close()
        harness.wait_for(lambda: metric(self.svc, 'entityd_streams_open', 0) == 0, scaled(10),
                         what='every stream counted off')
        # the instance still serves, and the streams' memory is gone with them
        st, _, b = harness.request(self.port, 'GET', '/api/entities/%s?%s' % (
            self.eid, self.signer.query(self.owner)))
        self.assertEqual(st, 200, b)
        self.assertTrue(self.svc.alive())


if __name__ == '__main__':
    harness.main()
