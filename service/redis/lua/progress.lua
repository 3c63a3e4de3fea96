-- progress: one member's progression (GET …/members/{address}/progress), in one round trip.
-- KEYS: entity, owners, admins, members, skills, levels:order
-- ARGV: caller, member address
-- Returns {isEnabled, public, role, caller is the member asked ('1'|'0'), the prog hash as a
-- flat array, rank (0 at 0 XP), {Level JSONs by XP then id}, {Skill JSONs of the skills in the
-- prog hash}, the member known ('1'|'0': a member, or a prog record)}. The service judges the
-- caller's access (the read rule, or the member themself) and "reached" (current thresholds,
-- endsAt) from these. An unknown entity is NOT_FOUND.
if redis.call('EXISTS', KEYS[1]) == 0 then return fail('NOT_FOUND', 'No such entity.') end
local f = redis.call('HMGET', KEYS[1], 'isEnabled', 'public')
local role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
local addr = ARGV[2]
local prog_key = KEYS[1] .. ':prog:' .. addr
local prog = redis.call('HGETALL', prog_key)
local known = (#prog > 0 or redis.call('HEXISTS', KEYS[4], addr) == 1) and '1' or '0'

-- The board entry prefix of a value: 9999999999999999 - v on 16 digits, by digit (exact, where
-- Lua's doubles are not past 2^53).
local NINES = {['0'] = '9', ['1'] = '8', ['2'] = '7', ['3'] = '6', ['4'] = '5', ['5'] = '4',
  ['6'] = '3', ['7'] = '2', ['8'] = '1', ['9'] = '0'}
local xp, skill_ids = nil, {}
for i = 1, #prog, 2 do
  local k = prog[i]
  if k == 'xp' then
    xp = prog[i + 1]
  elseif string.sub(k, 1, 2) == 's:' then
    skill_ids[#skill_ids + 1] = string.sub(k, 3)
  end
end
local rank = 0
if xp and string.match(xp, '^%d+$') and #xp <= 16 and string.match(xp, '[1-9]') then
  local inv = string.gsub(string.rep('0', 16 - #xp) .. xp, '%d', NINES)
  rank = 1 + redis.call('ZLEXCOUNT', KEYS[1] .. ':lb:xp', '-', '(' .. inv .. ':')
end
local levels = redis.call('ZRANGE', KEYS[6], 0, -1)
local skills = {}
if #skill_ids > 0 then
  local got = redis.call('HMGET', KEYS[5], unpack(skill_ids))
  for i = 1, #skill_ids do
    if got[i] then skills[#skills + 1] = got[i] end
  end
end
return {f[1] or '', f[2] or '', role, ARGV[1] == addr and '1' or '0', prog, rank, levels, skills,
  known}
