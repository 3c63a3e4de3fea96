"""Adversarial HTTP clients for entityd, stdlib only, loopback only.

Each hostile pattern is a function that runs to completion within its own deadline (every loop
is bounded in count and time) and returns what it saw; the caller runs them in threads next to
a well-behaved client and judges the service afterwards.

Hostile patterns:
  reset_while_owed(port, requests, delay)      send, then close with SO_LINGER 0 (RST) while
                                               the answer is still owed
  half_close(port, request)                    send, shutdown(SHUT_WR); the answer must come
  pipeline_never_read(port, request, n)        n pipelined requests, never a byte read
                                               (returns the open socket)
  slow_reader(port, request, n, ...)           pipelined requests, then one byte read a second
  header_trickle(port, request, interval)      the request one byte at a time
  say_nothing(port)                            connect and send nothing
  idle_after_answer(port)                      one answer, then silence on the keep-alive link

The well-behaved side: Checker, a keep-alive client looping over cases and checking every answer
(status and body), and VersionLog, which records each entity's __v as answers show it and finds
a __v that went backwards in time.

Server-side views used by the tests: process_fds(pid), rss_kib(pid), tcp_state(sock)."""

import bisect
import json
import os
import random
import selectors
import socket
import threading
import time
import uuid

from support.base import reset_close

HOST = '127.0.0.1'

TCP_ESTABLISHED = 1
TCP_CLOSE = 7
TCP_CLOSE_WAIT = 8


def connect(port, timeout=5.0, rcvbuf=None, nodelay=True):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        # Before connect, so the advertised window is small from the start.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect((HOST, port))
    if nodelay:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def tcp_state(s):
    """The kernel's TCP state of a socket (Linux TCP_INFO): 1 established, 7 closed (reset),
    8 close-wait (the peer sent FIN). None when it cannot be read."""
    try:
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
        return info[0]
    except OSError:
        return None


def peer_gone(s):
    """True once the peer closed or reset the connection, without reading unread data."""
    st = tcp_state(s)
    return st is not None and st != TCP_ESTABLISHED


def request_bytes(method, path, headers=None, body=b''):
    if isinstance(body, str):
        body = body.encode()
    h = [('Host', 'localhost')]
    for k, v in (headers or {}).items():
        h.append((k, v))
    if body and not any(k.lower() in ('content-length', 'transfer-encoding') for k, _ in h):
        h.append(('Content-Length', str(len(body))))
    if body and not any(k.lower() == 'content-type' for k, _ in h):
        h.append(('Content-Type', 'application/json'))
    head = '%s %s HTTP/1.1\r\n' % (method, path) + ''.join('%s: %s\r\n' % kv for kv in h)
    return head.encode('latin-1') + b'\r\n' + body


def random_entity_id():
    return 'c-' + str(uuid.uuid4())


def process_fds(pid):
    """Open file descriptors of a process (its sockets among them)."""
    try:
        return len(os.listdir('/proc/%d/fd' % pid))
    except OSError:
        return None


def server_holds(server_port, socks):
    """Which of our connections to server_port the server process still holds open: the
    kernel's view (/proc/net/tcp), where the server's end has an inode while a process owns
    it and none once it was closed (even if its FIN or data is still queued). Returns the
    subset of socks.

    A connection the service has not accepted yet (still in the listener's queue, as on a
    loaded machine for a while) has no inode either: "not held" means released only for a
    connection seen held before."""
    by_port = {}
    for s in socks:
        try:
            by_port[s.getsockname()[1]] = s
        except OSError:
            pass
    held = set()
    try:
        with open('/proc/net/tcp') as f:
            next(f)
            for line in f:
                parts = line.split()
                local, remote, inode = parts[1], parts[2], parts[9]
                lport = int(local.split(':')[1], 16)
                rport = int(remote.split(':')[1], 16)
                if lport == server_port and rport in by_port and inode != '0':
                    held.add(by_port[rport])
    except OSError:
        return set(socks)
    return held


def _own_rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return None


def rss_kib(pid):
    """The service's RSS: the process's, plus its workers' when it supervises some."""
    total = _own_rss_kib(pid)
    if total is None:
        return None
    for task in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/children' % (pid, task)) as f:
                kids = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for c in kids:
            try:
                total += _own_rss_kib(c) or 0
            except OSError:
                pass  # a worker that just exited
    return total


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        try:
            return json.loads(self.body.decode('utf-8'))
        except ValueError:
            return None

    def __repr__(self):
        return 'Response(%d, %r)' % (self.status, self.body[:200])


class ResponseReader:
    """Incremental HTTP/1.1 response parser (Content-Length bodies; 1xx interim skipped)."""

    def __init__(self):
        self.buf = b''

    def feed(self, data):
        self.buf += data

    def next(self):
        end = self.buf.find(b'\r\n\r\n')
        if end < 0:
            return None
        head = self.buf[:end].decode('latin-1')
        lines = head.split('\r\n')
        parts = lines[0].split(' ', 2)
        status = int(parts[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(':')
            headers[k.strip().lower()] = v.strip()
        n = 0 if 100 <= status < 200 else int(headers.get('content-length', '0'))
        if len(self.buf) < end + 4 + n:
            return None
        body = self.buf[end + 4:end + 4 + n]
        self.buf = self.buf[end + 4 + n:]
        if 100 <= status < 200:
            return self.next()
        return Response(status, headers, body)


def read_responses(s, count, deadline):
    """Reads up to count responses before deadline; returns (responses, eof)."""
    rd = ResponseReader()
    out = []
    eof = False
    while len(out) < count and time.monotonic() < deadline:
        r = rd.next()
        if r is not None:
            out.append(r)
            continue
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = s.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, BrokenPipeError):
            data = b''
        if not data:
            eof = True
            r = rd.next()
            while r is not None and len(out) < count:
                out.append(r)
                r = rd.next()
            break
        rd.feed(data)
    return out, eof


def wait_closed(s, deadline):
    """Reads (and drops) until EOF or reset; seconds from now until then, or None at the
    deadline."""
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, min(0.5, deadline - time.monotonic())))
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return time.monotonic() - t0
        if not data:
            return time.monotonic() - t0
    return None


# --------------------------------------------------------------------------------------------
# hostile patterns

def reset_while_owed(port, requests, delay):
    """Opens one connection per request, sends it, and delay seconds later resets them all
    (SO_LINGER 0) while the answers are owed. Returns how many were sent; a connection the
    service refused counts as not sent."""
    socks = []
    try:
        for req in requests:
            try:
                s = connect(port)
                s.sendall(req)
                socks.append(s)
            except OSError:
                pass
        time.sleep(delay)
        return len(socks)
    finally:
        for s in socks:
            reset_close(s)


def half_close(port, request, timeout=10.0):
    """Sends the request and shuts the write side; returns the Response read before EOF,
    or raises ConnectionError when the service closed without answering."""
    s = connect(port, timeout=timeout)
    try:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        got, _ = read_responses(s, 1, time.monotonic() + timeout)
        if not got:
            raise ConnectionError('no answer after a half-close')
        return got[0]
    finally:
        s.close()


def pipeline_never_read(port, request, n, rcvbuf=4096, send_timeout=2.0):
    """Opens a connection with a small receive buffer and sends n copies of request without
    reading anything. Returns (socket, requests fully sent). Sending stops when the service
    stops reading (send buffer full past send_timeout)."""
    s = connect(port, rcvbuf=rcvbuf)
    data = request * n
    s.setblocking(False)
    sent = 0
    deadline = time.monotonic() + send_timeout
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += s.send(data[sent:sent + 65536])
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            break
    return s, sent // len(request)


def slow_reader(port, request, n, deadline, rate=1.0, rcvbuf=4096):
    """Pipelines n requests on a small receive window, then reads one byte every 1/rate s.
    Returns (bytes read, seconds from the end of the pipelining until the service closed, or
    None). Closed: EOF or reset, or the service no longer holding its end (server_holds). The
    service's write deadline starts at the first answer the socket did not take, which may be
    up to the pipelining's second (more on a loaded machine) before that end: a close sooner
    than its deadline after it is no early close."""
    s, _ = pipeline_never_read(port, request, n, rcvbuf=rcvbuf, send_timeout=1.0)
    t0 = time.monotonic()
    got = 0
    next_read = t0
    accepted = False
    try:
        s.setblocking(False)
        while time.monotonic() < deadline:
            if server_holds(port, [s]):
                accepted = True
            elif accepted or got:
                # Closed on the service's side (its end has no owner); what we have not read
                # yet may still be queued. A byte read proves it was accepted, even when it was
                # closed before a look saw it held (on a loaded machine, seen: 27 bytes read
                # one a second from an answer whose connection was already gone).
                return got, time.monotonic() - t0
            if time.monotonic() >= next_read:
                next_read += 1.0 / rate
                try:
                    b = s.recv(1)
                except BlockingIOError:
                    b = None
                except OSError:
                    return got, time.monotonic() - t0
                if b == b'':
                    return got, time.monotonic() - t0
                got += 1 if b else 0
            time.sleep(0.05)
        return got, None
    finally:
        reset_close(s)


def header_trickle(port, request, interval, deadline):
    """Sends the request one byte every interval seconds. Returns ('answer', Response, t, sent),
    ('closed', None, t, sent) when the service closed first, or ('open', None, None, sent) at
    the deadline; t is seconds since connect, sent the seconds since connect when the last byte
    was sent (None when not all were). The service's header deadline starts at its accept and
    again at the request's first byte, both after connect: t is never short of it."""
    s = connect(port)
    t0 = time.monotonic()
    sent = None
    try:
        for i in range(len(request)):
            if time.monotonic() >= deadline:
                return 'open', None, None, sent
            try:
                s.send(request[i:i + 1])
            except OSError:
                return 'closed', None, time.monotonic() - t0, sent
            if i == len(request) - 1:
                sent = time.monotonic() - t0
            if peer_gone(s):
                return 'closed', None, time.monotonic() - t0, sent
            time.sleep(interval)
        got, eof = read_responses(s, 1, deadline)
        if got:
            return 'answer', got[0], time.monotonic() - t0, sent
        if eof:
            return 'closed', None, time.monotonic() - t0, sent
        return 'open', None, None, sent
    finally:
        reset_close(s)


def say_nothing(port, deadline):
    """Connects and sends nothing; seconds from just before the connect until the service
    closed, or None at deadline. The service's header deadline starts at its accept, which
    comes after the connect began: these seconds are never short of it."""
    t0 = time.monotonic()
    s = connect(port)
    try:
        w = wait_closed(s, deadline)
        return None if w is None else time.monotonic() - t0
    finally:
        reset_close(s)


def idle_after_answer(port, deadline):
    """One GET /healthz answered, then silence. Returns (status, from_answer, from_send):
    seconds until the service closed counted from when this client had read the answer, and
    from just before it sent the request (None when never closed).

    The service's idle deadline starts when its write of the answer completed, an event the
    client cannot see. It lies after the send began, so from_send is never short of
    IDLE_TIMEOUT_MS: a lower bound holds on it with no slack. It lies before the client has
    read the answer, by as long as this thread waited for the CPU (seconds on a loaded
    machine, with dozens of client threads sharing one interpreter lock), so from_answer may
    fall short of IDLE_TIMEOUT_MS by that much: it suits an upper bound only."""
    s = connect(port)
    try:
        t_send = time.monotonic()
        s.sendall(request_bytes('GET', '/healthz'))
        got, _ = read_responses(s, 1, deadline)
        if not got:
            return None, None, None
        t_answer = time.monotonic()
        w = wait_closed(s, deadline)
        if w is None:
            return got[0].status, None, None
        t_closed = time.monotonic()
        return got[0].status, t_closed - t_answer, t_closed - t_send
    finally:
        reset_close(s)


# --------------------------------------------------------------------------------------------
# the well-behaved side

class VersionLog:
    """__v of each entity as answers showed it: (sent, received, __v). A __v went backwards
    when an answer shows less than one received before that request was sent."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = {}

    def record(self, eid, sent, received, v):
        if not isinstance(v, int):
            return
        with self.lock:
            self.seen.setdefault(eid, []).append((sent, received, v))

    def max_seen(self, eid):
        with self.lock:
            return max((v for _, _, v in self.seen.get(eid, [])), default=None)

    def problems(self):
        out = []
        with self.lock:
            items = {k: list(v) for k, v in self.seen.items()}
        for eid, obs in items.items():
            by_recv = sorted(obs, key=lambda o: o[1])
            recv_times = [o[1] for o in by_recv]
            prefix_max, m = [], -1
            for o in by_recv:
                m = max(m, o[2])
                prefix_max.append(m)
            for sent, recv, v in obs:
                k = bisect.bisect_left(recv_times, sent)  # answers received before `sent`
                if k and prefix_max[k - 1] > v:
                    out.append('%s: __v %d seen after %d had been seen' %
                               (eid, v, prefix_max[k - 1]))
                    break
        return out


def ok_json(status=200):
    """An expectation: this status and {"success": true}."""
    def check(resp):
        if resp.status != status:
            return 'status %d, want %d: %r' % (resp.status, status, resp.body[:200])
        b = resp.json()
        if not isinstance(b, dict) or b.get('success') is not True:
            return 'body %r' % resp.body[:200]
        return None
    return check


def error_envelope(resp, code):
    b = resp.json()
    if not isinstance(b, dict) or b.get('success') is not False or \
            not isinstance(b.get('error'), dict) or b['error'].get('code') != code:
        return 'status %d with body %r' % (resp.status, resp.body[:200])
    if resp.status == 503 and resp.headers.get('retry-after') is None:
        return '503 without Retry-After'
    return None


class Case:
    """One request of a Checker and what its answer must be.

    expect(resp) returns None or a problem. needs_redis: a 503 unavailable or 504 timeout is
    accepted instead while Redis is faulty (Checker.faulty set). make(): (method, path, body,
    headers) built per call; or fixed method/path/body."""

    def __init__(self, name, method='GET', path='/', body=None, headers=None, expect=None,
                 needs_redis=True, make=None, after=None):
        self.name = name
        self.method, self.path, self.body, self.headers = method, path, body, headers
        self.expect = expect or ok_json()
        self.needs_redis = needs_redis
        self.make = make
        self.after = after  # after(resp, sent, received): e.g. record __v

    def build(self):
        if self.make:
            return self.make()
        return self.method, self.path, self.body, self.headers


class Checker:
    """A well-behaved keep-alive client in its own thread: loops over cases until stop() or
    its time runs out, checks every answer, and counts answers by status.

    While `faulty` is set (or always, with allow_unavailable=True), a case needing Redis may be
    answered 503 unavailable (with Retry-After) or 504 timeout instead. Anything else that is
    not the expected answer is a problem, and so is a connection the service closed with an
    answer owed."""

    def __init__(self, port, cases, seconds, pace=0.0, timeout=15.0, name='checker'):
        self.port = port
        self.cases = cases
        self.stop_at = time.monotonic() + seconds
        self.pace = pace
        self.timeout = timeout
        self.name = name
        self.faulty = threading.Event()
        self.allow_unavailable = False
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.problems = []
        self.problem_times = []  # when the request of each problem was sent
        self.statuses = {}
        self.log = []  # (sent, received, case name, status)
        self.sock = None
        self.reader = None
        self.connects = 0
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)

    def start(self):
        self.thread.start()
        return self

    def stop(self, join=30.0):
        self.stopped.set()
        self.thread.join(timeout=join)
        if self.sock:
            self.sock.close()
            self.sock = None
        return not self.thread.is_alive()

    def _problem(self, msg, sent=None):
        with self.lock:
            if len(self.problems) < 200:
                self.problems.append('%s: %s' % (self.name, msg))
                self.problem_times.append(sent if sent is not None else time.monotonic())

    def _connect(self):
        if self.sock:
            self.sock.close()
        self.sock = connect(self.port, timeout=self.timeout)
        self.connects += 1
        self.reader = ResponseReader()

    def _exchange(self, req):
        """Sends one request, reads one answer. Returns (Response or None, fresh)."""
        fresh = self.sock is None
        if fresh:
            self._connect()
        try:
            self.sock.sendall(req)
        except OSError:
            if fresh:
                raise
            self._connect()  # the kept-alive link was closed before we sent: a new one
            fresh = True
            self.sock.sendall(req)
        deadline = time.monotonic() + self.timeout
        while True:
            r = self.reader.next()
            if r is not None:
                return r, fresh
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError('no answer within %.1fs' % self.timeout)
            except ConnectionResetError:
                data = b''
            if not data:
                return None, fresh
            self.reader.feed(data)

    def _run(self):
        i = 0
        while not self.stopped.is_set() and time.monotonic() < self.stop_at and i < 10 ** 7:
            case = self.cases[i % len(self.cases)]
            i += 1
            method, path, body, headers = case.build()
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            req = request_bytes(method, path, headers, body or b'')
            faulty_at_send = self.faulty.is_set()
            sent = time.monotonic()
            try:
                resp, fresh = self._exchange(req)
                if resp is None and not fresh:
                    # Closed as we reused it: allowed once (a race with a keep-alive close).
                    self.sock.close()
                    self.sock = None
                    sent = time.monotonic()
                    resp, fresh = self._exchange(req)
            except (OSError, TimeoutError) as e:
                self._problem('%s %s: %s: %s' % (case.name, path[:80], type(e).__name__, e))
                if self.sock:
                    self.sock.close()
                self.sock = None
                time.sleep(0.05)
                continue
            received = time.monotonic()
            if resp is None:
                self._problem('%s: the service closed the connection with the answer owed' %
                              case.name)
                self.sock.close()
                self.sock = None
                continue
            faulty = faulty_at_send or self.faulty.is_set() or self.allow_unavailable
            with self.lock:
                self.statuses[resp.status] = self.statuses.get(resp.status, 0) + 1
                self.log.append((sent, received, case.name, resp.status))
            if faulty and case.needs_redis and resp.status in (503, 504):
                err = error_envelope(resp, 'unavailable' if resp.status == 503 else 'timeout')
                if err:
                    self._problem('%s: %s' % (case.name, err), sent)
            else:
                err = case.expect(resp)
                if err:
                    self._problem('%s %s: %s' % (case.name, method, err), sent)
                elif case.after:
                    case.after(resp, sent, received)
            if resp.headers.get('connection', '').lower() == 'close':
                self.sock.close()
                self.sock = None
            if self.pace:
                time.sleep(self.pace)


def run_threads(fns, join=60.0):
    """Runs each fn() in a thread; returns their results (an exception is returned as is)."""
    results = [None] * len(fns)

    def wrap(k, fn):
        try:
            results[k] = fn()
        except Exception as e:  # noqa: BLE001 - handed back to the caller
            results[k] = e

    ts = [threading.Thread(target=wrap, args=(k, fn), daemon=True) for k, fn in enumerate(fns)]
    for t in ts:
        t.start()
    deadline = time.monotonic() + join
    for t in ts:
        t.join(timeout=max(0.01, deadline - time.monotonic()))
    return results


def watch_closed(socks, deadline, interval=0.05):
    """Polls never-read sockets (TCP state, nothing read) until each is closed or reset by
    the peer; returns {socket: seconds until seen gone, or None}."""
    t0 = time.monotonic()
    out = {s: None for s in socks}
    while time.monotonic() < deadline and any(v is None for v in out.values()):
        for s in socks:
            if out[s] is None and peer_gone(s):
                out[s] = time.monotonic() - t0
        time.sleep(interval)
    return out


def fetch_metrics(port, timeout=5.0):
    s = connect(port, timeout=timeout)
    try:
        s.sendall(request_bytes('GET', '/metrics', {'Connection': 'close'}))
        got, _ = read_responses(s, 1, time.monotonic() + timeout)
        if not got or got[0].status != 200:
            raise ConnectionError('no /metrics answer: %r' % (got,))
        return got[0].body.decode('utf-8', 'replace')
    finally:
        s.close()


def shuffled(seq, seed=None):
    seq = list(seq)
    random.Random(seed).shuffle(seq)
    return seq
