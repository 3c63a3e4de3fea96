-- admins_add: owners add admins. KEYS: entity, owners, admins
-- ARGV: caller, platform, address... (lowercase, deduplicated). Returns the sorted admins.
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'owners')
if denied then return denied end
for i = 3, #ARGV do redis.call('SADD', KEYS[3], ARGV[i]) end
return sorted_members(KEYS[3])
