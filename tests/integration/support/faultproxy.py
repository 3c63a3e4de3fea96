"""The one TCP fault proxy of the tests: listens on a free loopback port and forwards every
connection to a real upstream (a Redis, or any TCP server such as a JSON-RPC node), one
selector thread, stdlib only.

On command it can
  delay(ms)         hold every reply byte for ms milliseconds before passing it on
  stall(for_s=None) hold every reply until release() (or, with for_s, that long)
  cut()             reset every open link at once (and, with refuse_s, refuse new ones
                    meanwhile); cut(link_only=True) closes (FIN) just the link that sent the
                    triggering command, which is not passed on
  sleep_upstream(s) put Redis to sleep (DEBUG SLEEP s, on a connection of its own) just before
                    the triggering command is passed on: Redis runs it late
each optionally armed only from the Nth command seen (counting from the arming; at_command=N)
or from the first command whose text matches a pattern (match=b'EVALSHA', a bytes regex over
the command's arguments joined by spaces). release() ends a delay or stall (held replies go out
in order) and disarms anything armed; triggered (an Event) is set when an armed fault acts.

It also observes, without changing anything:
  record=True       events (time, 'cmd', [args]) for each client command and (time, 'reply',
                    None) right before each reply chunk is passed on: mark() and since(mark)
  count(pattern, per=None)  how many client units (each starting where the regex `per`
                    matches; the whole stream when None) hold the bytes regex `pattern`:
                    counted(pattern) reads it (e.g. the HTTP requests holding "eth_call")
and passes on, changed:
  rewrite(pattern, repl)  the client bytes matching the regex pattern, replaced in each read
                    before it is passed on (a request line arrives whole in one read on
                    loopback): e.g. the path of an RPC URL the upstream does not serve

Commands are counted by parsing the client's RESP arrays (inline commands count as one each).
Bounded: at most max_conns links, at most max_held bytes held per link (the proxy stops
reading from the upstream beyond that), and stop() ends the thread and closes every socket.

    p = FaultProxy(redis).start()  # redis: a port, or an object with .port (kept as .upstream)
    p.url                          # give entityd redis://127.0.0.1:<p.port>/0
    p.stall(match=rb'EVALSHA')     # the first EVALSHA's reply and everything after it is held
    p.wait_triggered(5)
    p.release()
    p.stop()
"""

import re
import selectors
import socket
import threading
import time

from .base import reset_close

HOST = '127.0.0.1'


class _CommandCounter:
    """Splits a client->server byte stream into commands (RESP arrays or inline lines)."""

    MAX_PENDING = 1 << 24

    def __init__(self):
        self.buf = b''
        self.broken = False

    def feed(self, data):
        """Returns the list of complete commands (each a list of bytes arguments)."""
        if self.broken:
            return []
        self.buf += data
        out = []
        while self.buf:
            cmd, used = self._parse(self.buf)
            if cmd is None:
                break
            self.buf = self.buf[used:]
            out.append(cmd)
        if len(self.buf) > self.MAX_PENDING:
            self.broken = True  # not RESP we understand: stop counting, keep forwarding
            self.buf = b''
        return out

    @staticmethod
    def _parse(b):
        if b[:1] != b'*':
            end = b.find(b'\r\n')
            if end < 0:
                return None, 0
            return b[:end].split(), end + 2
        end = b.find(b'\r\n')
        if end < 0:
            return None, 0
        n = int(b[1:end])
        pos = end + 2
        args = []
        for _ in range(max(0, n)):
            if b[pos:pos + 1] != b'$':
                if pos >= len(b):
                    return None, 0
                raise ValueError('unexpected RESP from the client')
            e = b.find(b'\r\n', pos)
            if e < 0:
                return None, 0
            ln = int(b[pos + 1:e])
            if len(b) < e + 2 + ln + 2:
                return None, 0
            args.append(b[e + 2:e + 2 + ln])
            pos = e + 2 + ln + 2
        return args, pos


class _Link:
    def __init__(self, client, server):
        self.client = client
        self.server = server
        self.to_server = b''
        self.send_after = 0.0  # to_server waits until then (a sleep_upstream in progress)
        self.tail = b''        # the client bytes last seen, for patterns cut across reads
        self.counted = set()   # the count() patterns already found in this unit
        self.held = []        # [(release time or None for a stall, bytes)] in arrival order
        self.held_bytes = 0
        self.to_client = b''  # released, not yet written
        self.counter = _CommandCounter()


class FaultProxy:
    def __init__(self, upstream, port=0, max_conns=256, max_held=64 << 20, record=False):
        self.upstream = upstream
        self.upstream_port = getattr(upstream, 'port', upstream)
        self.max_conns = max_conns
        self.max_held = max_held
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((HOST, port))
        self.lsock.listen(128)
        self.lsock.setblocking(False)
        self.port = self.lsock.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.lock = threading.Lock()
        self.links = []
        self.stopping = False
        self.thread = None
        # fault state (guarded by lock)
        self.mode = None          # None, 'delay', 'stall', 'cut'
        self.delay_s = 0.0
        self.armed = None         # None or dict(kind, at_command, match, refuse_s, delay_s)
        self.refuse_until = 0.0
        self.cut_pending = False
        self.stall_until = 0.0    # a stall(for_s) ends then (monotonic); 0 when none
        self.triggered = threading.Event()
        self.record = record
        self.events = []          # with record: (time, 'cmd', args) and (time, 'reply', None)
        self.counts = {}          # count(): pattern -> [regex, per regex or None, units]
        self.rewrites = []        # rewrite(): (regex, replacement)
        # figures
        self.commands = 0
        self.connections = 0
        self.cuts = 0
        self.faults = {}

    # ---- control (any thread) --------------------------------------------------------------

    def _arm(self, kind, at_command, match, **extra):
        with self.lock:
            self.triggered.clear()
            spec = dict(kind=kind, at=None, match=None, **extra)
            if at_command:
                spec['at'] = self.commands + at_command
            if match:
                spec['match'] = re.compile(match) if isinstance(match, bytes) else \
                    re.compile(match.encode())
            if spec['at'] is None and spec['match'] is None:
                self._activate(spec, in_loop=False)
            else:
                self.armed = spec
        self._wake()

    @property
    def url(self):
        return 'redis://127.0.0.1:%d/0' % self.port

    def delay(self, ms, at_command=None, match=None):
        self._arm('delay', at_command, match, delay_s=ms / 1000.0)

    def stall(self, at_command=None, match=None, for_s=None):
        self._arm('stall', at_command, match, for_s=for_s)

    def cut(self, at_command=None, match=None, refuse_s=0.0, link_only=False):
        self._arm('cut', at_command, match, refuse_s=refuse_s, link_only=link_only)

    def sleep_upstream(self, seconds, at_command=None, match=None):
        self._arm('sleep', at_command, match, sleep_s=seconds)

    def count(self, pattern, per=None):
        """Starts counting the client units that hold pattern (see the module docstring)."""
        with self.lock:
            self.counts[pattern] = [re.compile(pattern), per and re.compile(per), 0]

    def rewrite(self, pattern, repl):
        with self.lock:
            self.rewrites.append((re.compile(pattern), repl))

    def counted(self, pattern):
        with self.lock:
            return self.counts[pattern][2]

    def mark(self):
        with self.lock:
            return len(self.events)

    def since(self, mark):
        with self.lock:
            return list(self.events[mark:])

    def release(self):
        """Ends a delay or stall (held replies go out now, in order) and disarms."""
        with self.lock:
            self.mode = None
            self.armed = None
            self.refuse_until = 0.0
            self.stall_until = 0.0
            for ln in self.links:
                for _, data in ln.held:
                    self._pass_reply(ln, data)
                ln.held = []
                ln.held_bytes = 0
        self._wake()

    def wait_triggered(self, timeout):
        return self.triggered.wait(timeout)

    def stats(self):
        with self.lock:
            return {'commands': self.commands, 'connections': self.connections,
                    'open': len(self.links), 'cuts': self.cuts, 'faults': dict(self.faults),
                    'mode': self.mode}

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self):
        self.sel.register(self.lsock, selectors.EVENT_READ, 'listen')
        self.sel.register(self.wake_r, selectors.EVENT_READ, 'wake')
        self.thread = threading.Thread(target=self._loop, daemon=True, name='resp-proxy')
        self.thread.start()
        return self

    def close(self):
        self.stop()

    def stop(self, timeout=5.0):
        self.stopping = True
        self._wake()
        if self.thread:
            self.thread.join(timeout)
        for ln in list(self.links):
            self._close_link(ln, reset=False)
        for s in (self.lsock, self.wake_r, self.wake_w):
            try:
                s.close()
            except OSError:
                pass
        try:
            self.sel.close()
        except (OSError, RuntimeError):
            pass

    # ---- internals (the selector thread) ---------------------------------------------------

    def _wake(self):
        try:
            self.wake_w.send(b'x')
        except OSError:
            pass

    def _activate(self, spec, in_loop=True, link=None):
        """With the lock held. Links are only closed on the selector thread: from another
        thread a cut is left for the loop to carry out. link: the one whose command armed it."""
        kind = spec['kind']
        self.faults[kind] = self.faults.get(kind, 0) + 1
        self.triggered.set()
        self.armed = None
        if kind == 'delay':
            self.mode = 'delay'
            self.delay_s = spec['delay_s']
        elif kind == 'stall':
            self.mode = 'stall'
            if spec.get('for_s'):
                self.stall_until = time.monotonic() + spec['for_s']
        elif kind == 'sleep' and link is not None:
            self._sleep_upstream(spec['sleep_s'], link)
        elif kind == 'cut' and spec.get('link_only') and link is not None:
            self.cuts += 1
            self._close_link(link, reset=False)
        elif kind == 'cut':
            self.mode = None
            self.cuts += 1
            self.refuse_until = time.monotonic() + spec.get('refuse_s', 0.0)
            if in_loop:
                self._cut_all()
            else:
                self.cut_pending = True

    def _sleep_upstream(self, seconds, link):
        """DEBUG SLEEP on a connection of its own, and link's commands held back a little:
        Redis is asleep when they arrive. Sent from here, not from a thread yet to start: on a
        loaded machine that start alone may take longer than the sleep."""
        arg = str(seconds).encode()
        try:
            side = socket.create_connection((HOST, self.upstream_port), timeout=10)
            side.sendall(b'*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$%d\r\n%s\r\n' %
                         (len(arg), arg))
        except OSError:
            return
        threading.Thread(target=self._await_close, args=(side,), daemon=True).start()
        link.send_after = time.monotonic() + 0.15

    @staticmethod
    def _await_close(sock):
        """Waits for sock's answer (DEBUG SLEEP's), then closes it."""
        try:
            sock.recv(64)
        except OSError:
            pass
        sock.close()

    def _cut_all(self):
        self.cut_pending = False
        for ln in list(self.links):
            self._close_link(ln, reset=True)

    def _close_link(self, ln, reset):
        if ln in self.links:
            self.links.remove(ln)
        for s in (ln.client, ln.server):
            try:
                self.sel.unregister(s)
            except (KeyError, ValueError, RuntimeError):
                pass
            if reset:
                reset_close(s)
                continue
            try:
                s.close()
            except OSError:
                pass

    def _interest(self, ln):
        try:
            ev_c = selectors.EVENT_READ | (selectors.EVENT_WRITE if ln.to_client else 0)
            ev_s = (selectors.EVENT_READ if ln.held_bytes < self.max_held else 0) | \
                (selectors.EVENT_WRITE if ln.to_server and
                 time.monotonic() >= ln.send_after else 0)
            self._modify(ln.client, ev_c, ('c', ln))
            self._modify(ln.server, ev_s, ('s', ln))
        except (ValueError, OSError):
            pass

    def _modify(self, s, ev, data):
        try:
            key = self.sel.get_key(s)
        except KeyError:
            if ev:
                self.sel.register(s, ev, data)
            return
        if not ev:
            self.sel.unregister(s)
        elif key.events != ev:
            self.sel.modify(s, ev, data)

    def _accept(self):
        for _ in range(64):
            try:
                c, _ = self.lsock.accept()
            except (BlockingIOError, OSError):
                return
            with self.lock:
                refuse = time.monotonic() < self.refuse_until or \
                    len(self.links) >= self.max_conns
            if refuse:
                reset_close(c)
                continue
            try:
                s = socket.create_connection((HOST, self.upstream_port), timeout=2.0)
            except OSError:
                reset_close(c)
                continue
            c.setblocking(False)
            s.setblocking(False)
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ln = _Link(c, s)
            with self.lock:
                self.links.append(ln)
                self.connections += 1
            self._interest(ln)

    def _on_client_data(self, ln, data):
        cmds = []
        try:
            cmds = ln.counter.feed(data)
        except ValueError:
            ln.counter.broken = True
        with self.lock:
            self._count(ln, data)
            now = time.monotonic()
            for cmd in cmds:
                self.commands += 1
                if self.record:
                    self.events.append((now, 'cmd', cmd))
                a = self.armed
                if a is None:
                    continue
                hit = (a['at'] is not None and self.commands >= a['at']) or \
                    (a['match'] is not None and a['match'].search(b' '.join(cmd)))
                if hit:
                    self._activate(a, link=ln)
                    if a['kind'] == 'cut':
                        return  # the link is gone: the triggering command is not sent
            for rx, repl in self.rewrites:
                data = rx.sub(repl, data)
        ln.to_server += data

    def _count(self, ln, data):
        """With the lock held: count() over data, the link's tail before it."""
        if not self.counts:
            return
        text = ln.tail + data
        start = len(ln.tail)
        for key, (rx, per, _) in self.counts.items():
            hits = [(m.end(), 1) for m in rx.finditer(text) if m.end() > start]
            if per is not None:
                hits += [(m.start(), 0) for m in per.finditer(text) if m.end() > start]
            for _, what in sorted(hits):
                if what == 0:
                    ln.counted.discard(key)
                elif key not in ln.counted:
                    ln.counted.add(key)
                    self.counts[key][2] += 1
        ln.tail = text[-256:]

    def _on_server_data(self, ln, data):
        with self.lock:
            if self.mode == 'stall':
                ln.held.append((None, data))
                ln.held_bytes += len(data)
            elif self.mode == 'delay' or ln.held:
                at = time.monotonic() + (self.delay_s if self.mode == 'delay' else 0.0)
                ln.held.append((at, data))
                ln.held_bytes += len(data)
            else:
                self._pass_reply(ln, data)

    def _pass_reply(self, ln, data):
        """With the lock held."""
        if self.record:
            self.events.append((time.monotonic(), 'reply', None))
        ln.to_client += data

    def _release_due(self):
        """Moves held replies whose time has come to the write buffers; returns the next
        release time or None."""
        now = time.monotonic()
        nxt = None
        with self.lock:
            for ln in self.links:
                if ln.send_after > now and ln.to_server:
                    nxt = ln.send_after if nxt is None else min(nxt, ln.send_after)
            if self.mode == 'stall' and self.stall_until and now >= self.stall_until:
                self.mode, self.stall_until = None, 0.0  # stall(for_s) over: release in order
            if self.mode == 'stall':
                return self.stall_until or nxt
            for ln in self.links:
                while ln.held:
                    at, data = ln.held[0]
                    if at is not None and at > now:
                        nxt = at if nxt is None else min(nxt, at)
                        break
                    ln.held.pop(0)
                    ln.held_bytes -= len(data)
                    self._pass_reply(ln, data)
        return nxt

    def _loop(self):
        while not self.stopping:
            with self.lock:
                if self.cut_pending:
                    self._cut_all()
            nxt = self._release_due()
            timeout = 0.2 if nxt is None else max(0.0, min(0.2, nxt - time.monotonic()))
            try:
                events = self.sel.select(timeout=timeout)
            except (OSError, ValueError):
                events = []
            for key, mask in events:
                if key.data == 'listen':
                    self._accept()
                    continue
                if key.data == 'wake':
                    try:
                        while self.wake_r.recv(4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    continue
                side, ln = key.data
                if ln not in self.links:
                    continue
                sock = ln.client if side == 'c' else ln.server
                if mask & selectors.EVENT_READ:
                    try:
                        data = sock.recv(262144)
                    except BlockingIOError:
                        data = None
                    except OSError:
                        data = b''
                    if data == b'':
                        with self.lock:
                            self._close_link(ln, reset=False)
                        continue
                    if data:
                        if side == 'c':
                            self._on_client_data(ln, data)
                        else:
                            self._on_server_data(ln, data)
                if ln not in self.links:
                    continue
                if mask & selectors.EVENT_WRITE:
                    buf = ln.to_client if side == 'c' else ln.to_server
                    try:
                        n = sock.send(buf[:262144])
                    except BlockingIOError:
                        n = 0
                    except OSError:
                        with self.lock:
                            self._close_link(ln, reset=False)
                        continue
                    if side == 'c':
                        ln.to_client = ln.to_client[n:]
                    else:
                        ln.to_server = ln.to_server[n:]
            self._release_due()
            with self.lock:
                links = list(self.links)
            for ln in links:
                self._interest(ln)
