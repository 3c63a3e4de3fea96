-- standalone
-- apikey_check: is an entity API key (CONTRACT section 13) valid: its record, and whether its
-- creator is still one of the entity's owners ("a key ends when its creator stops being an
-- owner"). Read-only, both keys declared: read through the read cache, a deleted key or a
-- removed owner leaves every instance's cache when Redis announces the change.
-- KEYS[1] ent:{c-…}:apikeys   KEYS[2] the entity's owners set   ARGV[1] the key's id
-- Returns false when there is no record, else {record, 1 when its creator is an owner else 0,
-- lastUsedAt ('' when never)}. The record's hash is compared by the service (constant time).
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return false end
local creator = string.match(rec, '^[^:]*:([^:]*):')
local owner = 0
if creator then owner = redis.call('SISMEMBER', KEYS[2], creator) end
return {rec, owner, redis.call('HGET', KEYS[1], 'u:' .. ARGV[1]) or ''}
