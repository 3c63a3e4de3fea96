-- read_access: what the read rule needs, atomically: the entity's flags and, only when the rule
-- will ask (private or disabled), the caller's role. Run inside a MULTI with the read itself,
-- so a large read (a members page) is a plain command instead of strings copied through Lua.
-- KEYS: entity, owners, admins, members   ARGV: caller
-- Returns {id or false (unknown entity), isEnabled, public, role}.
local f = redis.call('HMGET', KEYS[1], 'id', 'isEnabled', 'public')
if not f[1] then return {false, '1', '1', ''} end
local role = ''
if f[2] == '0' or f[3] == '0' then role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1]) end
return {f[1], f[2] or '1', f[3] or '1', role}
