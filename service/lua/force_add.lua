-- force_add: adds members as an owner or admin, all or nothing; present members keep their
-- record. KEYS: entity, owners, admins, members, member order
-- ARGV: caller, platform, chain, addedAt (ms, 16 digits zero-padded), addedAt (ISO),
--       address... (lowercase, deduplicated). Returns {added, existing}.
local role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'staff')
if denied then return denied end
local added, existing = 0, 0
local tail = '","chain":"' .. ARGV[3] .. '","addedAt":"' .. ARGV[5] .. '","addedBy":"' ..
  ARGV[1] .. '"}'
for i = 6, #ARGV do
  local a = ARGV[i]
  local record = '{"address":"' .. a .. tail
  if redis.call('HSETNX', KEYS[4], a, record) == 1 then
    redis.call('ZADD', KEYS[5], 0, ARGV[4] .. ':' .. a .. ':' .. record)
    added = added + 1
  else
    existing = existing + 1
  end
end
return {added, existing}
