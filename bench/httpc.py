"""httpc: the smallest HTTP/1.1 keep-alive client the bench helpers need (stdlib only).

Used as a module by the other helpers, and as a command:
  httpc.py get URL [OUT]      GET once; body bytes to OUT (exactly) or stdout; exit 1 unless 200
  httpc.py seq HOST PORT PATHS_FILE N
                              N sequential GETs on one keep-alive connection, cycling through
                              the paths; exit 1 on any non-200 answer
"""
import socket
import sys
import time
import urllib.parse


class Conn:
    """One keep-alive connection; request() sends one request and reads one whole answer."""

    def __init__(self, host, port, timeout=30.0):
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send_raw(self, data):
        self.sock.sendall(data)

    def read_response(self):
        """Returns (status, headers bytes, body bytes) of the next answer on the connection."""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed before the header block ended")
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed inside a body")
            rest += chunk
        self.buf = rest[length:]
        return status, head, rest[:length]

    def request(self, method, path, body=None, headers=None, content_type="application/json"):
        req = "%s %s HTTP/1.1\r\nHost: %s:%d\r\n" % (method, path, self.host, self.port)
        for k, v in (headers or {}).items():
            req += "%s: %s\r\n" % (k, v)
        if body is not None:
            req += "Content-Type: %s\r\nContent-Length: %d\r\n" % (content_type, len(body))
        data = req.encode() + b"\r\n" + (body or b"")
        self.sock.sendall(data)
        return self.read_response()


def get_url(url, timeout=30.0):
    """GET url once on a fresh connection: (status, headers, body)."""
    u = urllib.parse.urlsplit(url)
    c = Conn(u.hostname, u.port or 80, timeout)
    try:
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        return c.request("GET", path)
    finally:
        c.close()


def read_lines(path):
    with open(path) as f:
        return [l.strip() for l in f if l.strip()]


def main(argv):
    if len(argv) >= 2 and argv[0] == "get":
        status, head, body = get_url(argv[1])
        if len(argv) >= 3:
            with open(argv[2], "wb") as f:
                f.write(body)
        else:
            sys.stdout.buffer.write(body)
        sys.stderr.write(head.decode("latin-1") + "\n")
        return 0 if status == 200 else 1
    if len(argv) == 5 and argv[0] == "seq":
        host, port, paths, n = argv[1], int(argv[2]), read_lines(argv[3]), int(argv[4])
        c = Conn(host, port, timeout=120.0)
        bad = 0
        t0 = time.monotonic()
        for i in range(n):
            status, _, body = c.request("GET", paths[i % len(paths)])
            if status != 200:
                bad += 1
                if bad <= 3:
                    sys.stderr.write("seq: %d %s\n" % (status, body[:200]))
        c.close()
        print("seq_requests=%d non200=%d seconds=%.3f" % (n, bad, time.monotonic() - t0))
        return 1 if bad else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
