-- contrib_award: awards contributions (one, or a batch of up to 100) as an owner or admin, all
-- or nothing, for each of the awards to one entity that arrived in one loop turn (a group,
-- service/redis/group.h): they run one after the other, and each gets the answer it would
-- have had alone.
-- KEYS: the group's: entity, owners, admins, members, skills, contribs, skill order, level
-- order, XP board; then each award's: its idempotency key (the entity key when the request has
-- none), then the progression keys it changes (each member's prog hash, each skill's board):
-- declared so that the read cache drops them as soon as the answer is in; the script builds the
-- same names (prog_key, lb_key).
-- ARGV: the group's: events_max, the most contributions one member may receive per minute ('0':
-- no limit; past it 'RATE <seconds> <message>', nothing written); the number of awards; then
-- each award's key count, argument count and arguments: caller, platform, now (ms), now (ISO),
-- request digest ('' without a key), idempotency key used ('1'/'0'), the number of
-- contributions, then each contribution's fields, one argument each: id, member, xp ('0':
-- none), skill count, then each skill's id and score (numbers as strings, validated by the
-- service; no JSON to decode), then each contribution's Contribution JSON as the API returns
-- it, then each one's contribution.added event data (the service renders both: no JSON is
-- built here).
-- Every check of an award runs before its first write. Errors: 'INVALID <i> <field> <message>'
-- (i the contribution's index; the service names the field in the request's form), CONFLICT
-- (the key was used for another request). Answers one reply per award: {'OK', Contribution
-- JSONs as a JSON array}, {'REPLAY', the first answer's JSON array} or the error.
-- Progress, leaderboards and events: keys.h.
-- KEYS and ARGV are read hundreds of times a call: as locals they are upvalues of the
-- functions below, not a global table's fields.
local KEYS, ARGV = KEYS, ARGV
local moving = moving_guard(KEYS[1])
if moving then return moving end
local E, maxlen, per_minute = KEYS[1], ARGV[1], tonumber(ARGV[2]) or 0

-- What every award of the group asks the same way is asked once: the caller's role and gate,
-- and the levels of the progression template.
local gates = {}
local function gate(caller, platform)
  local at = caller .. platform
  if gates[at] == nil then
    local role = role_of(KEYS[2], KEYS[3], nil, caller)
    gates[at] = write_gate(E, role, platform, 'staff') or false
  end
  return gates[at] or nil
end

-- Levels by XP then id: {id column, XP, ends (ISO or ''), "<skill id> <score> ...", level id}. The lines are
-- found and cut by plain searches: a pattern tried at every byte of the template (kilobytes:
-- every level lists its skills) cost an award about 6% more in Redis.
local all_levels
local function levels_of_template()
  if all_levels then return all_levels end
  local tpl = redis.call('HGET', E, 'progtpl') or progtpl_build(KEYS[7], KEYS[8])
  all_levels = {}
  local at = string.sub(tpl, 1, 2) == 'L\t' and 0 or string.find(tpl, '\nL\t', 1, true)
  while at do
    local eol = string.find(tpl, '\n', at + 1, true) or #tpl + 1
    local t1 = string.find(tpl, '\t', at + 3, true)
    local t2 = t1 and string.find(tpl, '\t', t1 + 1, true)
    local t3 = t2 and string.find(tpl, '\t', t2 + 1, true)
    local t4 = t3 and string.find(tpl, '\t', t3 + 1, true)
    if t4 and t4 < eol then
      -- the id column: the level id, then ':<generation>' for a level id deleted before
      -- (progtpl_build); the whole column names its reachedAt field
      local col = string.sub(tpl, at + 3, t1 - 1)
      all_levels[#all_levels + 1] = {col,
        tonumber(string.sub(tpl, t1 + 1, t2 - 1)) or 0, string.sub(tpl, t2 + 1, t3 - 1),
        string.sub(tpl, t4 + 1, eol - 1), string.match(col, '^[^:]*')}
    end
    at = string.find(tpl, '\nL\t', eol, true)
  end
  return all_levels
end

-- Levels newly reached by member m, whose XP is now xp (nil: not known here), judged against
-- the member's prog hash; each is recorded with its time and a level.reached event. A level
-- whose XP the member has not reached cannot be newly reached: most awards reach none, and
-- then the hash is not read at all; nor its scores when those levels are reached already.
local function judge_levels(m, xp, now_ms, now_iso, caller)
  local levels = levels_of_template()
  local pk = prog_key(E, m)
  if not xp then xp = tonumber(redis.call('HGET', pk, 'xp') or '0') end
  local open = {}
  for _, lv in ipairs(levels) do
    if lv[2] > xp then break end -- levels are in XP order
    if not (lv[3] ~= '' and lv[3] <= now_iso) then open[#open + 1] = lv end
  end
  if #open == 0 then return end
  -- A member between two levels has reached every level its XP meets: asking only whether it
  -- has reached them (a missing field is false) spares reading its scores.
  if #open <= 64 then
    local names = {}
    for i, lv in ipairs(open) do names[i] = 'r:' .. lv[1] end
    local got = redis.call('HMGET', pk, unpack(names))
    local todo = {}
    for i, lv in ipairs(open) do
      if not got[i] then todo[#todo + 1] = lv end
    end
    if #todo == 0 then return end
    open = todo
  end
  local flat = redis.call('HGETALL', pk)
  local have = {}
  for i = 1, #flat, 2 do have[flat[i]] = flat[i + 1] end
  for _, lv in ipairs(open) do
    if not have['r:' .. lv[1]] then
      local reached = true
      for sid, score in string.gmatch(lv[4], '(%S+) (%S+)') do
        if tonumber(have['s:' .. sid] or '0') < tonumber(score) then
          reached = false
          break
        end
      end
      if reached then
        redis.call('HSET', pk, 'r:' .. lv[1], now_ms)
        emit(E, maxlen, 'level.reached', now_iso, caller, '{"member":' .. jstr(m) ..
          ',"level":' .. jstr(lv[5]) .. '}')
      end
    end
  end
end

-- The contribution index's time prefix; awards of one loop turn mostly share their ms.
local last_ms, last_stamp
local function stamp_of(now_ms)
  if now_ms ~= last_ms then
    last_ms, last_stamp = now_ms, string.format('%016d', tonumber(now_ms)) .. ':'
  end
  return last_stamp
end

-- One award: idem is its idempotency key, a the index of its first argument.
local function award(idem, a)
  local caller, platform, now_ms, now_iso = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local digest, keyed = ARGV[a + 4], ARGV[a + 5] == '1'
  local denied = gate(caller, platform)
  if denied then return denied end
  if keyed then
    local held = redis.call('GET', idem)
    if held then
      local nl = string.find(held, '\n', 1, true)
      if nl and string.sub(held, 1, nl - 1) == digest then
        return {'REPLAY', string.sub(held, nl + 1)}
      end
      return fail('CONFLICT', 'The idempotencyKey was used for another request.')
    end
  end
  -- Contribution i's fields start at ARGV[at[i]]: id, member, xp, skill count, then each
  -- skill's id and score. They are read where they lie: no table per contribution or skill.
  local n, at, f = tonumber(ARGV[a + 6]), {}, a + 7
  for i = 1, n do
    at[i] = f
    f = f + 4 + 2 * tonumber(ARGV[f + 3])
  end
  -- f is now the first record; the events follow the records.
  for i = 1, n do
    local p = at[i]
    if redis.call('HEXISTS', KEYS[4], ARGV[p + 1]) == 0 then
      return fail('INVALID', (i - 1) .. ' member is not a member of this entity.')
    end
    for j = 1, tonumber(ARGV[p + 3]) do
      if redis.call('HEXISTS', KEYS[5], ARGV[p + 2 + 2 * j]) == 0 then
        return fail('INVALID', (i - 1) .. ' skills[' .. (j - 1) ..
          '].skillId is not a skill of this entity.')
      end
    end
  end
  -- Awards per member and minute: a counter per member that expires a minute after the first
  -- award it counts (a fixed window), in the entity's slot.
  local counts = {}
  if per_minute > 0 then
    for i = 1, n do
      local m = ARGV[at[i] + 1]
      counts[m] = (counts[m] or 0) + 1
    end
    for m, n in pairs(counts) do
      local used = tonumber(redis.call('GET', E .. ':awards:' .. m) or '0')
      if used + n > per_minute then
        local ttl = redis.call('PTTL', E .. ':awards:' .. m)
        return fail('RATE', math.max(1, math.ceil(ttl / 1000)) .. ' ' .. m ..
          ' may receive at most ' .. per_minute .. ' contributions per minute.')
      end
    end
  end
  local stamp = stamp_of(now_ms)
  local out, touched, order, xp_of = {}, {}, {}, {}
  for i = 1, n do
    local p = at[i]
    local id, m, xp, record = ARGV[p], ARGV[p + 1], ARGV[p + 2], ARGV[f + i - 1]
    redis.call('HSET', KEYS[6], id, record)
    redis.call('ZADD', E .. ':contribs:of:' .. m, '0', stamp .. id)
    if xp ~= '0' then xp_of[m] = prog_add(E, m, 'xp', 'xp', xp) end
    for j = 1, tonumber(ARGV[p + 3]) do
      local sid = ARGV[p + 2 + 2 * j]
      prog_add(E, m, 's:' .. sid, sid, ARGV[p + 3 + 2 * j])
    end
    emit(E, maxlen, 'contribution.added', now_iso, caller, ARGV[f + n + i - 1])
    out[i] = record
    if not touched[m] then
      touched[m] = true
      order[#order + 1] = m
    end
  end
  -- Levels newly reached by the members this award touched, in level order (XP, then id),
  -- judged on the progression template (_prelude.lua).
  for _, m in ipairs(order) do judge_levels(m, xp_of[m], now_ms, now_iso, caller) end
  for m, c in pairs(counts) do
    local rk = E .. ':awards:' .. m
    redis.call('INCRBY', rk, c)
    if redis.call('PTTL', rk) < 0 then redis.call('PEXPIRE', rk, 60000) end
  end
  local answer = '[' .. table.concat(out, ',') .. ']'
  if keyed then
    redis.call('SET', idem, digest .. '\n' .. answer, 'EX', 86400)
  end
  return {'OK', answer}
end

local replies, k, a = {}, 10, 4
for i = 1, tonumber(ARGV[3]) do
  local nkeys, nargs = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  replies[i] = award(KEYS[k], a + 2)
  k, a = k + nkeys, a + 2 + nargs
end
return replies
