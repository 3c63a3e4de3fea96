-- read_members: one page of an entity's members for a signed read, atomically, in
-- (addedAt, address) order, with the flags and, only when the read rule will ask, the role.
-- KEYS: entity, owners, admins, members, member order
-- ARGV: caller, range start ('-' or '[<cursor>;'), count (page size + 1)
-- Returns nil for an unknown entity, else {order entries, isEnabled, public, role}.
-- O(log N + page).
local f = redis.call('HMGET', KEYS[1], 'id', 'isEnabled', 'public')
if not f[1] then return nil end
local role = ''
if f[2] == '0' or f[3] == '0' then role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1]) end
local entries = redis.call('ZRANGEBYLEX', KEYS[5], ARGV[2], '+', 'LIMIT', 0, tonumber(ARGV[3]))
return {entries, f[2] or '1', f[3] or '1', role}
