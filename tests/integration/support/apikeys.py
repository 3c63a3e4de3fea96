"""Entity API keys (CONTRACT section 13) as the service keeps them: the hash's key, and a
key's id and hash as the service computes them (field <id> ->
"<scope>:<creator>:<createdAtMs>:<key hash>:<name>"). Keys are made through
POST /api/entities/{id}/api-keys."""

import os

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
