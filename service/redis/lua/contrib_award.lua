-- contrib_award: awards contributions (one, or a batch of up to 100) as an owner or admin, all
-- or nothing. KEYS: entity, owners, admins, members, skills, contribs, idempotency key (the
-- entity key when the request has none), skill order, level order, then the progression keys
-- the award changes (each member's prog hash, the XP board, each skill's board): declared so
-- that the read cache drops them as soon as the answer is in; the script builds the same names
-- (prog_key, lb_key).
-- ARGV: caller, platform, now (ms), now (ISO), events_max, request digest ('' without a key),
--       idempotency key used ('1'/'0'), contributions (JSON array of {id, member, skills:
--       [{skillId, score}], xp}, validated by the service), the most contributions one
--       member may receive per minute ('0': no limit; past it 'RATE <seconds> <message>',
--       nothing written), then each contribution's Contribution JSON as the API returns it,
--       then each one's contribution.added event data (the service renders both: no JSON is
--       built here)
-- Every check runs before the first write. Errors: 'INVALID <i> <field> <message>' (i the
-- contribution's index; the service names the field in the request's form), CONFLICT (the key
-- was used for another request). Returns {'OK', Contribution JSONs as a JSON array} or
-- {'REPLAY', the first answer's JSON array}. Progress, leaderboards and events: keys.h.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'staff')
if denied then return denied end
local E, now_ms, now_iso, maxlen, caller = KEYS[1], ARGV[3], ARGV[4], ARGV[5], ARGV[1]
if ARGV[7] == '1' then
  local held = redis.call('GET', KEYS[7])
  if held then
    local nl = string.find(held, '\n', 1, true)
    if nl and string.sub(held, 1, nl - 1) == ARGV[6] then
      return {'REPLAY', string.sub(held, nl + 1)}
    end
    return fail('CONFLICT', 'The idempotencyKey was used for another request.')
  end
end
local list = cjson.decode(ARGV[8])
for i, c in ipairs(list) do
  if redis.call('HEXISTS', KEYS[4], c.member) == 0 then
    return fail('INVALID', (i - 1) .. ' member is not a member of this entity.')
  end
  for j, s in ipairs(c.skills) do
    if redis.call('HEXISTS', KEYS[5], s.skillId) == 0 then
      return fail('INVALID', (i - 1) .. ' skills[' .. (j - 1) ..
        '].skillId is not a skill of this entity.')
    end
  end
end
-- Awards per member and minute: a counter per member that expires a minute after the first
-- award it counts (a fixed window), in the entity's slot.
local per_minute, counts = tonumber(ARGV[9] or '0') or 0, {}
if per_minute > 0 then
  for _, c in ipairs(list) do counts[c.member] = (counts[c.member] or 0) + 1 end
  for m, n in pairs(counts) do
    local used = tonumber(redis.call('GET', E .. ':awards:' .. m) or '0')
    if used + n > per_minute then
      local ttl = redis.call('PTTL', E .. ':awards:' .. m)
      return fail('RATE', math.max(1, math.ceil(ttl / 1000)) .. ' ' .. m ..
        ' may receive at most ' .. per_minute .. ' contributions per minute.')
    end
  end
end
local n = #list
local stamp = string.format('%016d', tonumber(now_ms)) .. ':'
local out, touched, order = {}, {}, {}
for i, c in ipairs(list) do
  redis.call('HSET', KEYS[6], c.id, ARGV[9 + i])
  redis.call('ZADD', E .. ':contribs:of:' .. c.member, 0, stamp .. c.id)
  if c.xp > 0 then prog_add(E, c.member, 'xp', 'xp', c.xp) end
  for _, s in ipairs(c.skills) do
    prog_add(E, c.member, 's:' .. s.skillId, s.skillId, s.score)
  end
  emit(E, maxlen, 'contribution.added', now_iso, caller, ARGV[9 + n + i])
  out[i] = ARGV[9 + i]
  if not touched[c.member] then
    touched[c.member] = true
    order[#order + 1] = c.member
  end
end
-- Levels newly reached by the members this award touched, in level order (XP, then id), judged
-- on the progression template (_prelude.lua) against each member's prog hash read once.
-- The level lines are found and cut by plain searches: a pattern tried at every byte of the
-- template (kilobytes: every level lists its skills) cost an award about 6% more in Redis.
local tpl = redis.call('HGET', E, 'progtpl') or progtpl_build(KEYS[8], KEYS[9])
local levels = {}
local at = string.sub(tpl, 1, 2) == 'L\t' and 0 or string.find(tpl, '\nL\t', 1, true)
while at do
  local eol = string.find(tpl, '\n', at + 1, true) or #tpl + 1
  local t1 = string.find(tpl, '\t', at + 3, true)
  local t2 = t1 and string.find(tpl, '\t', t1 + 1, true)
  local t3 = t2 and string.find(tpl, '\t', t2 + 1, true)
  local t4 = t3 and string.find(tpl, '\t', t3 + 1, true)
  if t4 and t4 < eol then
    local ends = string.sub(tpl, t2 + 1, t3 - 1)
    if not (ends ~= '' and ends <= now_iso) then
      levels[#levels + 1] = {string.sub(tpl, at + 3, t1 - 1),
        tonumber(string.sub(tpl, t1 + 1, t2 - 1)) or 0, string.sub(tpl, t4 + 1, eol - 1)}
    end
  end
  at = string.find(tpl, '\nL\t', eol, true)
end
if #levels > 0 then
  for _, m in ipairs(order) do
    local pk = prog_key(E, m)
    local flat = redis.call('HGETALL', pk)
    local have = {}
    for i = 1, #flat, 2 do have[flat[i]] = flat[i + 1] end
    local xp = tonumber(have.xp or '0')
    for _, lv in ipairs(levels) do
      if not have['r:' .. lv[1]] and xp >= lv[2] then
        local reached = true
        for sid, score in string.gmatch(lv[3], '(%S+) (%S+)') do
          if tonumber(have['s:' .. sid] or '0') < tonumber(score) then
            reached = false
            break
          end
        end
        if reached then
          redis.call('HSET', pk, 'r:' .. lv[1], now_ms)
          emit(E, maxlen, 'level.reached', now_iso, caller, '{"member":' .. jstr(m) ..
            ',"level":' .. jstr(lv[1]) .. '}')
        end
      end
    end
  end
end
for m, n in pairs(counts) do
  local rk = E .. ':awards:' .. m
  redis.call('INCRBY', rk, n)
  if redis.call('PTTL', rk) < 0 then redis.call('PEXPIRE', rk, 60000) end
end
local answer = '[' .. table.concat(out, ',') .. ']'
if ARGV[7] == '1' then
  redis.call('SET', KEYS[7], ARGV[6] .. '\n' .. answer, 'EX', 86400)
end
return {'OK', answer}
