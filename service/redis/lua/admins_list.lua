-- admins_list: the admins, for owners and admins.
-- KEYS: entity, owners, admins   ARGV: caller, platform   Returns the sorted admins.
local denied = staff_read(KEYS[1], role_of(KEYS[2], KEYS[3], nil, ARGV[1]), ARGV[2], 'admins')
if denied then return denied end
return sorted_members(KEYS[3])
