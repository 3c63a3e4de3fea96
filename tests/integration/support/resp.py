"""A small blocking RESP client: one command over a fresh connection, or a reader over a
socket the caller holds."""

import socket



class RespError(Exception):
    pass


def resp_encode(args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)


class RespReader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b''

    def _line(self):
        while b'\r\n' not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('redis closed the connection')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\r\n', 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('redis closed the connection')
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b'+':
            return rest.decode()
        if t == b'-':
            raise RespError(rest.decode())
        if t == b':':
            return int(rest)
        if t == b'$':
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b'*':
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RespError('unexpected reply %r' % line)


def resp_command(port, *args, timeout=5.0, host='127.0.0.1', password=None):
    """One command over a fresh connection; returns the decoded reply."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        r = RespReader(s)
        if password:
            s.sendall(resp_encode(['AUTH', password]))
            r.read()
        s.sendall(resp_encode(list(args)))
        return r.read()
