"""Event streams against hostile clients (CONTRACT section 14; run under the sanitizers, suite
'hostile'): a client that never reads is closed at STREAM_BUFFER_BYTES while the others go on,
a client that resets mid-stream or half-closes is counted off once and the service goes on, a
client that sends more after its request is not read from."""

import os
import sys
import threading

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


if __name__ == '__main__':
    harness.main()
