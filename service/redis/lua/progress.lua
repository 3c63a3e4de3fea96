-- progress: one member's progression (GET …/members/{address}/progress), in one round trip,
-- without the caller's role: the service sends the role lookups beside it when they decide.
-- KEYS: entity, members, the member's prog hash, the XP board, skill order, level order, the XP
-- board's gone zset (removed members' entries not yet swept: not counted), owners, admins.
-- Every key read is declared: the read cache follows exactly these keys.
-- ARGV: member address, caller, platform ('1'|'0')
-- Returns {entity id (nil: no such entity), isEnabled, public, known ('1'|'0': a member, or a
-- prog record), the prog hash as a flat array, rank (0 at 0 XP or when not a member), the
-- progression template
-- (_prelude.lua, progtpl_build)}, or its first three alone when the caller may read neither
-- the entity nor as the member themself (CONTRACT §12: a refusal costs the role lookups, not
-- the template). The service judges access and "reached" from these.
local f = redis.call('HMGET', KEYS[1], 'id', 'isEnabled', 'public')
if not f[1] then return {false, '', ''} end
local role = role_of(KEYS[8], KEYS[9], KEYS[2], ARGV[2])
if not (ARGV[3] == '1' or role == 'owner' or
    (f[2] ~= '0' and (f[3] ~= '0' or role ~= '' or ARGV[2] == ARGV[1]))) then
  return {f[1], f[2] or '', f[3] or ''}
end
f[4] = redis.call('HGET', KEYS[1], 'progtpl')
local prog = redis.call('HGETALL', KEYS[3])
local xp = 0
for i = 1, #prog, 2 do
  if prog[i] == 'xp' then xp = tonumber(prog[i + 1]) or 0 end
end
-- Asked only where it decides: whether an address with no progress is known, and whether one
-- with XP is ranked (a removed member keeps its progress, off the boards: rank 0).
local member = (#prog == 0 or xp > 0) and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1
local known = (#prog > 0 or member) and '1' or '0'
local rank = 0
if xp > 0 and member then
  local above = '(' .. lb_inv(xp) .. ':'
  rank = 1 + redis.call('ZLEXCOUNT', KEYS[4], '-', above) -
    redis.call('ZLEXCOUNT', KEYS[7], '-', above)
end
-- Entities whose skill tree was last written before the template existed: built here.
local tpl = f[4] or progtpl_build(KEYS[5], KEYS[6])
return {f[1], f[2] or '', f[3] or '', known, prog, rank, tpl}
