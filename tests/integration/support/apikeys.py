"""Entity API keys (CONTRACT section 13) as the service keeps them: the hash's key, a key's id
and hash as the service computes them, and make_api_key(redis, entity_id, creator, scope,
name), which writes a key's settled record straight into Redis (the record the api-keys
routes write): field <id> -> "<scope>:<creator>:<createdAtMs>:<key hash>:<name>"."""

import os
import time

from .wallets import keccak256

ID_LEN = 24  # the key hash's first hex digits: the key's public id


def apikeys_key(entity_id):
    return 'ent:{%s}:apikeys' % entity_id


def key_parts(key):
    """(id, hash) of a key, as the service computes them (auth/token.c)."""
    digest = keccak256(key.encode()).hex()
    return digest[:ID_LEN], digest


def new_api_key(entity_id):
    """A key of the settled form for entity_id ("c-<uuid>"): ek_ + the uuid's 32 hex digits +
    32 random hex digits."""
    return 'ek_' + entity_id[2:].replace('-', '') + os.urandom(16).hex()


def make_api_key(redis, entity_id, creator, scope, name='bot'):
    """Writes a key of entity_id made by creator (anything with .address, or the address) with
    scope 'award' or 'admin'; returns (key, id)."""
    address = getattr(creator, 'address', creator).lower()
    key = new_api_key(entity_id)
    kid, digest = key_parts(key)
    now = int(time.time() * 1000)
    redis.cli('HSET', apikeys_key(entity_id), kid,
              '%s:%s:%d:%s:%s' % (scope, address, now, digest, name))
    return key, kid
