-- read_skills: an entity's skill tree for a signed read, atomically: the pre-rendered
-- '"skills":[…],"levels":[…]' fragment, the flags and, only when the read rule will ask, the
-- caller's role.
-- KEYS: entity, owners, admins, members   ARGV: caller
-- Returns nil for an unknown entity, else {fragment, isEnabled, public, role}.
local f = redis.call('HMGET', KEYS[1], 'id', 'isEnabled', 'public', 'skilltree')
if not f[1] then return nil end
local role = ''
if f[2] == '0' or f[3] == '0' then role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1]) end
return {f[4] or '"skills":[],"levels":[]', f[2] or '1', f[3] or '1', role}
