-- contrib_award: awards contributions (one, or a batch of up to 100) as an owner or admin, all
-- or nothing. KEYS: entity, owners, admins, members, skills, levels, contribs, idempotency key
-- (the entity key when the request has none)
-- ARGV: caller, platform, now (ms), now (ISO), events_max, request digest ('' without a key),
--       idempotency key used ('1'/'0'), contributions (JSON array of {id, member, skills:
--       [{skillId, score}], xp, title, url (null when absent)}, validated by the service),
--       the most contributions one member may receive per minute ('0': no limit; past it
--       'RATE <seconds> <message>', nothing written)
-- Every check runs before the first write. Errors: 'INVALID <i> <field> <message>' (i the
-- contribution's index; the service names the field in the request's form), CONFLICT (the key
-- was used for another request). Returns {'OK', Contribution JSONs as a JSON array} or
-- {'REPLAY', the first answer's JSON array}. Progress, leaderboards and events: keys.h.
local role = role_of(KEYS[2], KEYS[3], nil, ARGV[1])
local denied = write_gate(KEYS[1], role, ARGV[2], 'staff')
if denied then return denied end
local E, now_ms, now_iso, maxlen, caller = KEYS[1], ARGV[3], ARGV[4], ARGV[5], ARGV[1]
if ARGV[7] == '1' then
  local held = redis.call('GET', KEYS[8])
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
local eid = redis.call('HGET', E, 'id')
local tail = ',"createdAt":' .. jstr(now_iso) .. ',"createdBy":' .. jstr(caller) ..
  ',"revoked":false,"revokedAt":null,"revokedBy":null,"reason":null}'
local stamp = string.format('%016d', tonumber(now_ms)) .. ':'
local out, touched, order = {}, {}, {}
for _, c in ipairs(list) do
  local skills = {}
  for j, s in ipairs(c.skills) do
    skills[j] = '{"skillId":' .. jstr(s.skillId) .. ',"score":' .. string.format('%d', s.score) ..
      '}'
  end
  local sk = '[' .. table.concat(skills, ',') .. ']'
  local xp = string.format('%d', c.xp)
  local url = c.url == cjson.null and 'null' or jstr(c.url)
  local json = '{"id":' .. jstr(c.id) .. ',"entityID":' .. jstr(eid) .. ',"member":' ..
    jstr(c.member) .. ',"skills":' .. sk .. ',"xp":' .. xp .. ',"title":' .. jstr(c.title) ..
    ',"url":' .. url .. tail
  redis.call('HSET', KEYS[7], c.id, json)
  redis.call('ZADD', E .. ':contribs:of:' .. c.member, 0, stamp .. c.id)
  if c.xp > 0 then prog_add(E, c.member, 'xp', 'xp', c.xp) end
  for _, s in ipairs(c.skills) do
    prog_add(E, c.member, 's:' .. s.skillId, s.skillId, s.score)
  end
  emit(E, maxlen, 'contribution.added', now_iso, caller, '{"id":' .. jstr(c.id) .. ',"member":' ..
    jstr(c.member) .. ',"xp":' .. xp .. ',"skills":' .. sk .. '}')
  out[#out + 1] = json
  if not touched[c.member] then
    touched[c.member] = true
    order[#order + 1] = c.member
  end
end
-- Levels newly reached by the members this award touched, in level order (XP, then id).
local levels = {}
for _, text in ipairs(redis.call('HVALS', KEYS[6])) do
  levels[#levels + 1] = cjson.decode(text)
end
table.sort(levels, function(a, b)
  if a.XP ~= b.XP then return a.XP < b.XP end
  return a.id < b.id
end)
for _, m in ipairs(order) do
  local pk = prog_key(E, m)
  for _, lv in ipairs(levels) do
    local ended = type(lv.endsAt) == 'string' and lv.endsAt <= now_iso
    if not ended and redis.call('HEXISTS', pk, 'r:' .. lv.id) == 0 then
      local have = tonumber(redis.call('HGET', pk, 'xp') or '0')
      local reached = have >= lv.XP
      for i, sid in ipairs(lv.skillIds) do
        if not reached then break end
        reached = tonumber(redis.call('HGET', pk, 's:' .. sid) or '0') >= (lv.scores[i] or 0)
      end
      if reached then
        redis.call('HSET', pk, 'r:' .. lv.id, now_ms)
        emit(E, maxlen, 'level.reached', now_iso, caller, '{"member":' .. jstr(m) ..
          ',"level":' .. jstr(lv.id) .. '}')
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
  redis.call('SET', KEYS[8], ARGV[6] .. '\n' .. answer, 'EX', 86400)
end
return {'OK', answer}
