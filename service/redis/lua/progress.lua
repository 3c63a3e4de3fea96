-- progress: one member's progression (GET …/members/{address}/progress), in one round trip,
-- without the caller's role: the service sends the role lookups beside it when they decide.
-- KEYS: entity, members, the member's prog hash, the XP board, skill order, level order, the XP
-- board's gone zset (removed members' entries not yet swept: not counted). Every key read is
-- declared: the read cache follows exactly these keys.
-- ARGV: member address
-- Returns {entity id (nil: no such entity), isEnabled, public, known ('1'|'0': a member, or a
-- prog record), the prog hash as a flat array, rank (0 at 0 XP or when not a member), the
-- progression template
-- (_prelude.lua, progtpl_build)}. The service judges access and "reached" from these.
local f = redis.call('HMGET', KEYS[1], 'id', 'isEnabled', 'public', 'progtpl')
if not f[1] then return {false, '', ''} end
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
