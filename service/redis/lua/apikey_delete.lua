-- apikey_delete: an owner (or a platform admin) ends an entity API key (CONTRACT section 13).
-- Its record and its lastUsedAt go together; every instance's key check reads the hash through
-- the tracked read cache, so the key is refused everywhere from Redis's announcement on.
-- KEYS: entity, owners, admins, apikeys (keys.h)
-- ARGV: caller, platform, events_max, now (ISO), key id
-- Writes an apiKey.deleted event {id, name, scope}. Returns 1; NOT_FOUND for no such key.
local denied = write_open(nil, 'owners')
if denied then return denied end
local rec = redis.call('HGET', KEYS[4], ARGV[5])
if not rec then return fail('NOT_FOUND', 'No such API key.') end
redis.call('HDEL', KEYS[4], ARGV[5], 'u:' .. ARGV[5])
-- "<scope>:<creator>:<createdAtMs>:<hash>:<name>": the name is all after the fourth ':'
local scope, name = string.match(rec, '^([^:]*):[^:]*:[^:]*:[^:]*:(.*)$')
emit(KEYS[1], ARGV[3], 'apiKey.deleted', ARGV[4], ARGV[1], '{"id":' .. jstr(ARGV[5]) ..
  ',"name":' .. jstr(name) .. ',"scope":' .. jstr(scope) .. '}')
return 1
