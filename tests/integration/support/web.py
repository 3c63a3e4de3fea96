"""HTTP clients over loopback: one request per connection, keep-alive clients and raw
connections for pipelining, partial sends and closes."""

import http.client
import json
import socket
import time



def _decode_body(headers, data):
    ctype = headers.get('content-type', '')
    if ctype.startswith('application/json'):
        try:
            return json.loads(data.decode('utf-8'))
        except ValueError:
            return data
    return data


def request(port, method, path, body=None, headers=None, timeout=10, host='127.0.0.1'):
    """One request on a fresh connection: (status, lower-case headers dict, JSON or bytes).

    body: dict/list (sent as JSON with Content-Type application/json), str or bytes."""
    hdrs = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        if not any(k.lower() == 'content-type' for k in hdrs):
            hdrs['Content-Type'] = 'application/json'
    elif isinstance(body, str):
        body = body.encode()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        if (resp.getheader('Content-Type') or '').startswith('text/event-stream'):
            # A stream has no end to read to: its status and head, then the close.
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, b''
        data = resp.read()
        h = {k.lower(): v for k, v in resp.getheaders()}
        return resp.status, h, _decode_body(h, data)
    finally:
        conn.close()


class Client:
    """A keep-alive http.client connection: several requests on one socket."""

    def __init__(self, port, timeout=10, host='127.0.0.1'):
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)
        self.conn.connect()
        self.first_sock = self.conn.sock

    def request(self, method, path, body=None, headers=None):
        hdrs = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault('Content-Type', 'application/json')
        self.conn.request(method, path, body=body, headers=hdrs)
        resp = self.conn.getresponse()
        data = resp.read()
        h = {k.lower(): v for k, v in resp.getheaders()}
        return resp.status, h, _decode_body(h, data)

    def same_socket(self):
        return self.conn.sock is not None and self.conn.sock is self.first_sock

    def close(self):
        self.conn.close()


class Response:
    def __init__(self, status, reason, header_list, body):
        self.status = status
        self.reason = reason
        self.header_list = header_list
        self.headers = {}
        for k, v in header_list:
            self.headers[k.lower()] = v
        self.body = body
        self.json = _decode_body(self.headers, body) if body else None

    def __repr__(self):
        return '<Response %d %r %r>' % (self.status, self.headers, self.body[:300])


class RawConn:
    """A raw TCP connection for pipelining, partial sends and observing closes."""

    def __init__(self, port, timeout=10, host='127.0.0.1', rcvbuf=None):
        if rcvbuf:  # set before connect, so the advertised window is small from the start
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect((host, port))
        else:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b''
        self.eof = False

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout('deadline passed')
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b''
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_response(self, timeout=None):
        """Reads one response (an interim 1xx has no body). Raises ConnectionError on EOF."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while b'\r\n\r\n' not in self.buf:
            if self.eof or not self._fill(deadline):
                raise ConnectionError('connection closed before a response; got %r' % self.buf)
        head, rest = self.buf.split(b'\r\n\r\n', 1)
        lines = head.decode('latin-1').split('\r\n')
        parts = lines[0].split(' ', 2)
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ''
        hl = []
        for line in lines[1:]:
            k, _, v = line.partition(':')
            hl.append((k.strip(), v.strip()))
        hd = {k.lower(): v for k, v in hl}
        n = 0 if 100 <= status < 200 else int(hd.get('content-length', '0'))
        while len(rest) < n:
            self.buf = head + b'\r\n\r\n' + rest
            if self.eof or not self._fill(deadline):
                raise ConnectionError('connection closed in a response body')
            head, rest = self.buf.split(b'\r\n\r\n', 1)
        body, self.buf = rest[:n], rest[n:]
        return Response(status, reason, hl, body)

    def read_available(self, wait=0.2):
        """Whatever arrives within wait seconds (b'' if nothing)."""
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline and not self.eof:
                self._fill(deadline)
        except (socket.timeout, TimeoutError):
            pass
        data, self.buf = self.buf, b''
        return data

    def wait_closed(self, timeout):
        """Seconds until the peer closed (EOF or reset), or None if still open at the deadline.
        Bytes received meanwhile are kept in self.buf."""
        start = time.monotonic()
        deadline = start + timeout
        while not self.eof:
            try:
                self._fill(deadline)
            except (socket.timeout, TimeoutError):
                return None
            except OSError:
                self.eof = True
        return time.monotonic() - start

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def http_request_bytes(method, path, headers=None, body=b'', host='127.0.0.1'):
    """Serializes one HTTP/1.1 request (Content-Length added when a body is given)."""
    if isinstance(body, str):
        body = body.encode()
    h = [('Host', host)]
    for k, v in (headers or {}).items() if isinstance(headers, dict) else (headers or []):
        h.append((k, v))
    if body and not any(k.lower() in ('content-length', 'transfer-encoding') for k, _ in h):
        h.append(('Content-Length', str(len(body))))
    head = '%s %s HTTP/1.1\r\n' % (method, path) + ''.join('%s: %s\r\n' % kv for kv in h)
    return head.encode('latin-1') + b'\r\n' + body


def read_answers(conns):
    """Reads one answer from each connection and closes it: [(status, JSON body)]."""
    out = []
    for c in conns:
        resp = c.read_response()
        out.append((resp.status, json.loads(resp.body)))
        c.close()
    return out


def chunked(body, sizes):
    """body in chunked transfer coding, cut into the given sizes (the rest as one chunk)."""
    if isinstance(body, str):
        body = body.encode()
    out, i = [], 0
    for n in sizes:
        if i >= len(body):
            break
        part = body[i:i + n]
        out.append(b'%x\r\n%s\r\n' % (len(part), part))
        i += n
    if i < len(body):
        out.append(b'%x\r\n%s\r\n' % (len(body) - i, body[i:]))
    out.append(b'0\r\n\r\n')
    return b''.join(out)
