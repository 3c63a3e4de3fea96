-- apikey_create: an owner (or a platform admin) makes an entity API key (CONTRACT section 13).
-- The key itself never reaches Redis: the service sends its hash, and its id (the hash's first
-- 24 digits, auth/token.h). Nothing is written ahead of this script, so its own gate is the
-- whole check (CONTRACT §12: a refused create leaves nothing).
-- KEYS: entity, owners, admins, apikeys (keys.h)
-- ARGV: caller, platform, events_max, now (ISO), now (ms), key id, scope, key hash, name, the
--       most keys an entity may hold
-- Writes the record "<scope>:<creator>:<createdAtMs>:<key hash>:<name>" and an apiKey.created
-- event {id, name, scope} (never the key or its hash). Returns 1; FULL past the most.
local denied = write_open(nil, 'owners')
if denied then return denied end
local held = 0
for _, f in ipairs(redis.call('HKEYS', KEYS[4])) do
  if string.sub(f, 1, 2) ~= 'u:' then held = held + 1 end
end
if held >= tonumber(ARGV[10]) then
  return fail('FULL', '- This entity may hold at most ' .. ARGV[10] .. ' API keys; delete one ' ..
    'first.')
end
-- 96 random bits of the hash: a second key of one id is not expected, but never replaces one
if redis.call('HSETNX', KEYS[4], ARGV[6], ARGV[7] .. ':' .. ARGV[1] .. ':' .. ARGV[5] .. ':' ..
    ARGV[8] .. ':' .. ARGV[9]) == 0 then
  return fail('CONFLICT', 'An API key of this id exists already; try again.')
end
emit(KEYS[1], ARGV[3], 'apiKey.created', ARGV[4], ARGV[1], '{"id":' .. jstr(ARGV[6]) ..
  ',"name":' .. jstr(ARGV[9]) .. ',"scope":' .. jstr(ARGV[7]) .. '}')
return 1
