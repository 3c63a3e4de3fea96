"""Keccak-256 and EIP-55 in Python (independent of the service's C code), wallets that sign
through entityd-sign (real secp256k1 keys), signature forms and the sign-in message."""

import datetime
import hashlib
import hmac
import os
import subprocess
import uuid

from .base import ENTITYD_SIGN_BIN, ISSUED_SIGNATURES, tmpdir
from .web import request


_RC = [
    0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
    0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
    0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
    0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
    0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
    0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
]
_ROT = [[0, 36, 3, 41, 18], [1, 44, 10, 45, 2], [62, 6, 43, 15, 61], [28, 55, 25, 21, 56],
        [27, 20, 39, 8, 14]]
_M64 = (1 << 64) - 1


def _rol(x, n):
    return ((x << n) | (x >> (64 - n))) & _M64 if n else x


def _keccak_f(a):
    for rc in _RC:
        c = [a[x][0] ^ a[x][1] ^ a[x][2] ^ a[x][3] ^ a[x][4] for x in range(5)]
        d = [c[(x - 1) % 5] ^ _rol(c[(x + 1) % 5], 1) for x in range(5)]
        a = [[a[x][y] ^ d[x] for y in range(5)] for x in range(5)]
        b = [[0] * 5 for _ in range(5)]
        for x in range(5):
            for y in range(5):
                b[y][(2 * x + 3 * y) % 5] = _rol(a[x][y], _ROT[x][y])
        a = [[b[x][y] ^ ((~b[(x + 1) % 5][y]) & b[(x + 2) % 5][y]) for y in range(5)]
             for x in range(5)]
        a[0][0] ^= rc
    return a


def keccak256(data):
    rate = 136
    msg = bytearray(data) + b'\x01'
    while len(msg) % rate:
        msg += b'\x00'
    msg[-1] |= 0x80
    a = [[0] * 5 for _ in range(5)]
    for off in range(0, len(msg), rate):
        block = msg[off:off + rate]
        for i in range(rate // 8):
            x, y = i % 5, i // 5
            a[x][y] ^= int.from_bytes(block[8 * i:8 * i + 8], 'little')
        a = _keccak_f(a)
    out = b''
    for i in range(4):
        out += a[i % 5][i // 5].to_bytes(8, 'little')
    return out


def eip55(address):
    """The EIP-55 checksummed spelling of a 0x address."""
    h = address.lower()[2:]
    digest = keccak256(h.encode()).hex()
    return '0x' + ''.join(ch.upper() if ch.isalpha() and int(digest[i], 16) >= 8 else ch
                          for i, ch in enumerate(h))


SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def _run_sign(args, key=None, stdin=None, timeout=30):
    env = dict(os.environ)
    env.pop('ENTITYD_SIGN_KEY', None)
    if key is not None:
        env['ENTITYD_SIGN_KEY'] = key
    p = subprocess.run([ENTITYD_SIGN_BIN] + args, input=stdin, env=env, capture_output=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError('entityd-sign %s failed (%d): %s' %
                           (' '.join(args), p.returncode, p.stderr.decode(errors='replace')))
    return p.stdout.decode()


def _parse_sign_line(line):
    fields = dict(kv.split('=', 1) for kv in line.strip().split('&'))
    return fields['address'], fields['signature']


class Wallet:
    """A private key (hex) and its lowercase address; signs through entityd-sign."""

    def __init__(self, key, address=None):
        self.key = key if key.startswith('0x') else '0x' + key
        self.address = address or _run_sign(['--address-only'], key=self.key).strip()

    @classmethod
    def from_key(cls, key):
        return cls(key)

    @classmethod
    def random(cls, n):
        """n fresh wallets from one entityd-sign --random N --keys-out F run."""
        d = tmpdir('keys-')
        path = os.path.join(d, 'keys')
        out = _run_sign(['--random', str(n), '--keys-out', path, '--address-only'])
        addrs = [l.strip() for l in out.splitlines() if l.strip()]
        with open(path) as f:
            keys = [l.strip() for l in f if l.strip() and not l.startswith('#')]
        assert len(keys) == n and len(addrs) == n, (keys, addrs)
        return [cls(k, a) for k, a in zip(keys, addrs)]

    def sign(self, message, compact=False, v01=False):
        """(address, signature) for message (str or bytes), as personal_sign would give."""
        if isinstance(message, str):
            message = message.encode()
        args = ['--message', '-']
        if compact:
            args.append('--compact')
        if v01:
            args.append('--v01')
        address, sig = _parse_sign_line(_run_sign(args, key=self.key, stdin=message))
        assert address == self.address, (address, self.address)
        ISSUED_SIGNATURES.add(sig.lower()[2:])
        return address, sig

    def sign_url(self, port, compact=False, v01=False):
        """Signs the service's current message fetched by entityd-sign --url itself."""
        args = ['--url', 'http://127.0.0.1:%d' % port]
        if compact:
            args.append('--compact')
        if v01:
            args.append('--v01')
        address, sig = _parse_sign_line(_run_sign(args, key=self.key))
        ISSUED_SIGNATURES.add(sig.lower()[2:])
        return address, sig

    def query(self, message, address=None, **kw):
        """'address=..&signature=..' for message (address overridable)."""
        a, s = self.sign(message, **kw)
        return auth_query(address or a, s)


_fresh = []  # wallets made ahead for fresh_wallet()


def fresh_wallet():
    """A wallet never used before in this run (revoke consumes signatures)."""
    if not _fresh:
        _fresh.extend(Wallet.random(16))
    return _fresh.pop()


def fresh_address():
    """A random address that no wallet of the run holds (lowercase 0x hex)."""
    return '0x' + uuid.uuid4().hex + uuid.uuid4().hex[:8]


def personal_hash(message):
    """The EIP-191 hash of message (str), 0x hex."""
    data = message.encode()
    return '0x' + keccak256(b'\x19Ethereum Signed Message:\n%d' % len(data) + data).hex()


def probe_path(address, signature):
    """A signed read that does not consume the signature: an unknown entity, 404 once the
    caller is signed in, 401 (or 503 when a check could not be made) otherwise."""
    return '/api/entities/c-%s?%s' % (uuid.uuid4(), auth_query(address, signature))


def revoke_path(address, signature):
    return '/api/auth/revoke?' + auth_query(address, signature)


def auth_query(address=None, signature=None, **extra):
    parts = []
    if address is not None:
        parts.append('address=' + address)
    if signature is not None:
        parts.append('signature=' + signature)
    for k, v in extra.items():
        parts.append('%s=%s' % (k, v))
    return '&'.join(parts)


def split_signature(sig):
    """(r, s, v) integers of a 65-byte 0x signature."""
    h = sig[2:] if sig.startswith('0x') else sig
    assert len(h) == 130, sig
    return int(h[:64], 16), int(h[64:128], 16), int(h[128:], 16)


def join_signature(r, s, v):
    return '0x%064x%064x%02x' % (r, s, v)


def to_compact(sig):
    """EIP-2098: r || (s with the y-parity in its top bit)."""
    r, s, v = split_signature(sig)
    parity = v - 27 if v >= 27 else v
    return '0x%064x%064x' % (r, s | (parity << 255))


def to_v01(sig):
    r, s, v = split_signature(sig)
    return join_signature(r, s, v - 27 if v >= 27 else v)


def high_s(sig):
    """The same signature in its high-s form (n - s, parity flipped): rejected by EIP-2."""
    r, s, v = split_signature(sig)
    flipped = {27: 28, 28: 27, 0: 1, 1: 0}[v]
    return join_signature(r, SECP256K1_N - s, flipped)


def iso_ms(unix_ms):
    dt = datetime.datetime.fromtimestamp(unix_ms / 1000, tz=datetime.timezone.utc)
    return dt.strftime('%Y-%m-%dT%H:%M:%S.') + '%03dZ' % (unix_ms % 1000)


def signin_nonce(secret, epoch):
    return hmac.new(secret.encode(), ('epoch:%d' % epoch).encode(),
                    hashlib.sha256).digest()[:16].hex()


def signin_message(secret, domain, epoch_seconds, epoch):
    """The CONTRACT section 2 message, computed independently of the service."""
    return '\n'.join([
        'Sign in to %s' % domain,
        '',
        'Sign this message to prove you own this wallet. It costs no gas.',
        '',
        'Epoch: %d' % epoch,
        'Nonce: %s' % signin_nonce(secret, epoch),
        'Issued At: %s' % iso_ms(epoch * epoch_seconds * 1000),
        'Expiration Time: %s' % iso_ms((epoch + 2) * epoch_seconds * 1000),
    ])


def current_message(port):
    """(message text, epoch) from GET /api/auth/message."""
    st, _, body = request(port, 'GET', '/api/auth/message')
    assert st == 200, (st, body)
    return body['data']['message'], body['data']['epoch']


class Signer:
    """Signs each wallet's sign-in message once (signing is slow) and gives the address and
    signature query of a wallet."""

    def __init__(self, message):
        self.message = message
        self.creds = {}

    def query(self, w):
        c = self.creds.get(w.address)
        if c is None:
            c = self.creds[w.address] = w.sign(self.message)
        return auth_query(*c)
