-- admins_remove: owners remove an admin (removing one who is not is no error).
-- KEYS: entity, owners, admins   ARGV: caller, platform, address. Returns the sorted admins.
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'owners')
if denied then return denied end
redis.call('SREM', KEYS[3], ARGV[3])
return sorted_members(KEYS[3])
