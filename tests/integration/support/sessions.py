"""Session records (CONTRACT section 13) as the service keeps them: the key, a token's id and
hash as the service computes them, and make_session(redis, wallet, ttl_ms), the one place a
test writes a record straight into Redis: for what POST /api/auth/session cannot make at
once (a session whose expiry has passed). Live sessions are made through the endpoint."""

import os
import time

from .wallets import keccak256

ID_LEN = 24  # the token hash's first hex digits: the session's public id


def session_key(address):
    return 'auth:sess:{%s}' % address.lower()


def token_parts(token):
    """(id, hash) of a token, as the service computes them (auth/token.c)."""
    digest = keccak256(token.encode()).hex()
    return digest[:ID_LEN], digest


def new_token(address):
    """A token of the settled form for address: es_ + 40 hex + 32 random hex."""
    return 'es_' + address.lower()[2:] + os.urandom(16).hex()


def make_session(redis, wallet, ttl_ms, kind='e', created_ms=None):
    """Writes a live session of wallet (anything with .address, or the address itself) that
    ends ttl_ms from now; returns its token. Record: field <id> ->
    "<expiresAtMs>:<createdAtMs>:<kind>:<hash>:-", PEXPIREAT at its expiry."""
    address = getattr(wallet, 'address', wallet)
    token = new_token(address)
    sid, digest = token_parts(token)
    now = int(time.time() * 1000)
    created = now if created_ms is None else created_ms
    expires = now + ttl_ms
    key = session_key(address)
    redis.cli('HSET', key, sid, '%d:%d:%s:%s:-' % (expires, created, kind, digest))
    if ttl_ms > 0:
        redis.cli('PEXPIREAT', key, str(expires))
    return token
