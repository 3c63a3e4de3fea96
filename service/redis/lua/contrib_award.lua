-- contrib_award: awards contributions (one, or a batch of up to 100) as an owner or admin, all
-- or nothing, for each of the awards to one entity that arrived in one loop turn (a group,
-- service/redis/group.h): they run one after the other, and each gets the answer it would
-- have had alone.
-- KEYS: the group's: entity, owners, admins, members, skills, contribs, skill order, level
-- order, XP board; then each award's idempotency key, when the request has one. The
-- progression keys an award changes (each member's prog hash, each board) are built here
-- (prog_key, lb_key) and dropped from the read cache by the service when the answer comes.
-- ARGV: the group's: events_max ("<EVENTS_MAX>:<EVENTS_MAX_BYTES>", emit), the most
-- contributions one member may receive per minute ('0': no limit; past it 'RATE <seconds>
-- <message>', nothing written), caller, platform, now (ms), now (ISO) (the awards of one
-- caller in one loop turn share their time: group_now_ms); the number of awards; then each
-- award's key count (1 with an idempotency key, else 0), argument count and arguments: request
-- digest ('' without a key), the number of contributions, then each contribution's fields, one
-- argument each: id, member, xp ('0': none), skill count, then each skill's id and score
-- (numbers as strings, validated by the service; no JSON to decode), then each contribution's
-- Contribution JSON as the API returns it, then each one's contribution.added event data (the
-- service renders both: no JSON is built here).
-- Every check of an award runs before its first write. Errors: 'INVALID <i> <field> <message>'
-- (i the contribution's index; the service names the field in the request's form), 'OVER <i>
-- <field> <message>' (the award would take an XP or a score past 2^53 - 1: a conflict, the
-- field named the same way), CONFLICT (the key was used for another request). Answers one
-- reply per award, each a string (a table costs Redis several lookups to send back): 'OK' (the
-- service answers with the records it rendered: '[' .. the records joined by ',' .. ']', what
-- the idempotency key stores), or 'REPLAY <the first answer's JSON array>', or the error.
-- Progress, leaderboards and events: keys.h.
--
-- What it costs Redis beyond its commands is mostly per redis.call and per string made (each
-- new string is hashed whole): so each key name is built once a call, each number parsed once,
-- what all the awards of the call ask of the same hash is asked in one command, and the writes
-- nothing in the call reads back (the contribution records, the board entries) go out once, at
-- the end, as variadic commands whose result is what the awards one by one would have left.
-- KEYS and ARGV are read hundreds of times a call: as locals they are upvalues of the
-- functions below, not a global table's fields.
-- The owners and admins (KEYS[2], KEYS[3]) are read for the caller's role, never written:
-- keys-read-only: 2 3
local KEYS, ARGV = KEYS, ARGV
local call = redis.call
local moving = moving_guard(KEYS[1])
if moving then return moving end
local E, maxlen, per_minute = KEYS[1], ARGV[1], tonumber(ARGV[2]) or 0
local limits = events_limits(maxlen)
local caller, platform, now_ms, now_iso = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local EVENTS = E .. ':events'

-- Numbers as parsed once a call: tonumber is a strtod, and the same few counts and scores come
-- back in every award.
local nums = {}
local function num(s)
  local v = nums[s]
  if v == nil then
    v = tonumber(s)
    nums[s] = v
  end
  return v
end

-- Key names and fields per skill and board, and the members' rate counters, built once a call
-- (a member's prog hash and index keys are built once an award: most calls award each member
-- once).
local rate_of, sfield_of, board_of = {}, {}, {}
local function board(by)
  local k = board_of[by]
  if not k then
    k = lb_key(E, by)
    board_of[by] = k
  end
  return k
end

-- What every award of the group asks the same way is asked once: the caller's role and gate,
-- and the levels of the progression template.
local gated
local function gate()
  if gated == nil then
    gated = write_gate(E, role_of(KEYS[2], KEYS[3], nil, caller), platform, 'staff') or false
  end
  return gated or nil
end

-- The progression template (keys.h), read once a call, and only when needed: the levels (a
-- member that may reach one), and the skill tree the boards roll totals up (board_tree: nil for
-- a flat entity, which then moves one board a skill as it always did). Whether the entity is a
-- tree (its hash's "nested", render_skilltree) and whether its boards are being rebuilt
-- ("lbRebuild": then a flat tree is a tree too) come first, in one small read, so that an
-- award in a flat entity reads the template no more often than before trees.
local tpl_text, tree, tree_read, rebuilding
local function template()
  if not tpl_text then
    tpl_text = call('HGET', E, 'progtpl') or progtpl_build(KEYS[7], KEYS[8])
  end
  return tpl_text
end
local function board_tree_of()
  if not tree_read then
    tree_read = true
    local got = call('HMGET', E, 'nested', 'lbRebuild')
    rebuilding = got[2] and true or false
    if got[1] == '1' or rebuilding then tree = board_tree(template(), rebuilding) end
  end
  return tree
end

-- Levels by XP then id: {id column, XP, ends (ISO or ''), "<skill id> <score> ...", level id,
-- reachedAt field, the required levels' reachedAt fields (nil: none)}. The lines are found and
-- cut by plain searches: a pattern tried at every byte of the template (kilobytes: every level
-- lists its skills) cost an award about 6% more in Redis. any_requires: some level requires
-- others (then judge_levels judges in passes). judge_tree: the skills' parents where some skill
-- has one (tpl_tree; false for a flat list), made only once a level's thresholds are judged.
local all_levels, any_requires, judge_tree
local function levels_of_template()
  if all_levels then return all_levels end
  local tpl = template()
  all_levels = {}
  -- the last line "R": some level requires others (progtpl_build)
  local requiring = string.byte(tpl, -1) == 82 and string.byte(tpl, -2) == 10
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
      -- the required levels' places, in a column of their own (progtpl_build)
      local t5 = requiring and string.find(tpl, '\t', t4 + 1, true)
      local need_end, places = eol - 1, nil
      if t5 and t5 < eol then
        need_end, places = t5 - 1, string.sub(tpl, t5 + 1, eol - 1)
        any_requires = true
      end
      all_levels[#all_levels + 1] = {col,
        tonumber(string.sub(tpl, t1 + 1, t2 - 1)) or 0, string.sub(tpl, t2 + 1, t3 - 1),
        string.sub(tpl, t4 + 1, need_end), string.match(col, '^[^:]*'), 'r:' .. col, places}
    end
    at = string.find(tpl, '\nL\t', eol, true)
  end
  if any_requires then
    for _, lv in ipairs(all_levels) do
      if lv[7] then
        local fields = {}
        for k in string.gmatch(lv[7], '%d+') do
          local r = all_levels[tonumber(k) + 1]
          if r then fields[#fields + 1] = r[6] end
        end
        lv[7] = fields
      end
    end
  end
  return all_levels
end

-- Levels newly reached by member m, whose XP is now xp (nil: not known here), judged against
-- the member's prog hash; each is recorded with its time and a level.reached event. A level
-- whose XP the member has not reached cannot be newly reached: most awards reach none, and
-- then the hash is not read at all; nor its scores when those levels are reached already.
local function judge_levels(pk, m, xp)
  local levels = levels_of_template()
  -- most awards leave the member below the next level's XP: nothing to build or read then
  if not levels[1] or (xp and levels[1][2] > xp) then return end
  local open, asked = {}, false
  if not xp then
    -- XP not known (scores alone were awarded): the XP and whether each level still open in
    -- time was reached come in one read
    local live, names = {}, {'xp'}
    for _, lv in ipairs(levels) do
      if not (lv[3] ~= '' and lv[3] <= now_iso) then
        live[#live + 1] = lv
        names[#names + 1] = lv[6]
      end
    end
    if #live == 0 then return end
    if #live <= 64 then
      local got = call('HMGET', pk, unpack(names))
      xp = tonumber(got[1] or '0')
      for i, lv in ipairs(live) do
        if lv[2] > xp then break end -- levels are in XP order
        if not got[i + 1] then open[#open + 1] = lv end
      end
      asked = true
    else
      xp = tonumber(call('HGET', pk, 'xp') or '0')
    end
  end
  if not asked then
    for _, lv in ipairs(levels) do
      if lv[2] > xp then break end -- levels are in XP order
      if not (lv[3] ~= '' and lv[3] <= now_iso) then open[#open + 1] = lv end
    end
    if #open == 0 then return end
    -- A member between two levels has reached every level its XP meets: asking only whether
    -- it has reached them (a missing field is false) spares reading its scores.
    if #open <= 64 then
      local names = {}
      for i, lv in ipairs(open) do names[i] = lv[6] end
      local got = call('HMGET', pk, unpack(names))
      local todo = {}
      for i, lv in ipairs(open) do
        if not got[i] then todo[#todo + 1] = lv end
      end
      open = todo
    end
  end
  if #open == 0 then return end
  local flat = call('HGETALL', pk)
  local have = {}
  for i = 1, #flat, 2 do have[flat[i]] = flat[i + 1] end
  -- A threshold is met by the member's total in the skill (CONTRACT section 15), rolled up
  -- from the own scores over the current tree, so a moved branch or a deleted leaf counts at
  -- once. In a flat list a total is the own score: no tree is cut.
  if judge_tree == nil then judge_tree = tpl_tree(template()) or false end
  local totals = judge_tree and tpl_totals(judge_tree, have)
  -- A level that requires others is reached once each of them is recorded reached, before or
  -- by this award: the open levels are judged again after a pass that reached one, so that
  -- prerequisites are recorded (and their events written) first, whatever their XP. Without
  -- requires in the entity, one pass.
  local again = true
  while again do
    again = false
    for _, lv in ipairs(open) do
      if not have[lv[6]] then
        local reached = true
        for sid, score in string.gmatch(lv[4], '(%S+) (%S+)') do
          local got = totals and (totals[sid] or 0) or tonumber(have['s:' .. sid] or '0')
          if got < tonumber(score) then
            reached = false
            break
          end
        end
        local reqs = lv[7]
        if reached and reqs then
          for _, f in ipairs(reqs) do
            if not have[f] then
              reached = false
              break
            end
          end
        end
        if reached then
          call('HSET', pk, lv[6], now_ms)
          emit(E, maxlen, 'level.reached', now_iso, caller, '{"member":' .. jstr(m) ..
            ',"level":' .. jstr(lv[5]) .. '}')
          if any_requires then
            have[lv[6]] = now_ms
            again = true
          end
        end
      end
    end
  end
end

-- What each contribution.added event adds to the byte budget's count beyond its data
-- (event_bytes), the same for every award of the call.
local event_overhead = event_bytes('contribution.added', now_iso, caller, '')

-- The contribution index's time prefix, the same for every award of the call.
local stamp = string.format('%016d', tonumber(now_ms)) .. ':'

-- The writes left for the end of the call. records: the contribs hash's fields and values.
-- gone[board], added[board]: the entries to take off and put on each board, for members the
-- call awards once: their value before the award and after it, as prog_add would have moved
-- them. A member awarded more than once in the call (twice[m]) moves in place, award by award.
-- cur_of[m][field]: a member's XP ('xp') or score ('s:<skill id>') as stored now, once read
-- for the bound below, kept in step by progress: a member awarded again in the call is not
-- read again.
local cur_of = {}
local records, gone, added, board_list = {}, {}, {}, {}
local twice, events_added = {}, 0
-- In a tree, one award may move a member on one board more than once (two of its skills under
-- one parent): pend[board][m] is the place in added[board] of the entry queued for it this
-- call, which a later move replaces (the entry before the first move is the one to take off).
local pend = {}
local function move(m, by, before, after)
  if before == after then return end
  local lb = board_of[by] or board(by)
  if twice[m] then
    if before > 0 then call('ZREM', lb, lb_member(before, m)) end
    if after > 0 then call('ZADD', lb, '0', lb_member(after, m)) end
    return
  end
  local g, d = gone[lb], added[lb]
  if not g then
    g, d = {}, {}
    gone[lb], added[lb] = g, d
    board_list[#board_list + 1] = lb
    pend[lb] = {}
  end
  local pl = pend[lb] or {}
  pend[lb] = pl
  local at = pl[m]
  if at then
    -- awards only add: the entry queued is above 0, and so is this one
    d[at] = lb_member(after, m)
    return
  end
  if before > 0 then g[#g + 1] = lb_member(before, m) end
  if after > 0 then
    local i = #d
    d[i + 1], d[i + 2] = '0', lb_member(after, m)
    pl[m] = i + 2
  end
end

local function progress(pk, m, field, by, delta)
  local after = call('HINCRBY', pk, field, delta)
  local known_m = cur_of[m]
  if known_m then known_m[field] = after end
  local before = after - (nums[delta] or num(delta))
  local lb = board_of[by] or board(by)
  if twice[m] then
    if before > 0 then call('ZREM', lb, lb_member(before, m)) end
    if after > 0 then call('ZADD', lb, '0', lb_member(after, m)) end
    return after
  end
  local g, d = gone[lb], added[lb]
  if not g then
    g, d = {}, {}
    gone[lb], added[lb] = g, d
    board_list[#board_list + 1] = lb
  end
  if before > 0 then g[#g + 1] = lb_member(before, m) end
  if after > 0 then
    local i = #d
    d[i + 1], d[i + 2] = '0', lb_member(after, m)
  end
  return after
end

-- An award's score to skill sid in a tree: the own score, then the total of sid (its "t:" field
-- once a skill below it gave the member a score, else the own score is its board's value) and
-- of each ancestor, each board moved with it; the totals written in one HSET. cur_of[m] holds
-- every field read (bounded: a "t:" field absent is -1). ups_hit: the ancestors touched by the
-- award, whose boards the answer names (the service drops them from its read cache).
local tfield_of, ancestors_of, ups_hit = {}, {}, nil
local function tfield(sid)
  local f = tfield_of[sid]
  if not f then
    f = 't:' .. sid
    tfield_of[sid] = f
  end
  return f
end
local function sfield(sid)
  local f = sfield_of[sid]
  if not f then
    f = 's:' .. sid
    sfield_of[sid] = f
  end
  return f
end
local function ancestors(sid)
  local ups = ancestors_of[sid]
  if not ups then
    ups = board_ancestors(tree, sid)
    ancestors_of[sid] = ups
  end
  return ups
end
local function total_of(c, sid)
  local t = c[tfield(sid)]
  if t and t >= 0 then return t end
  return c[sfield(sid)] or 0
end
local function tree_progress(pk, m, sid, sf, delta)
  local d = nums[delta] or num(delta)
  local c = cur_of[m]
  local own = call('HINCRBY', pk, sf, delta)
  c[sf] = own
  local tf, sets = tfield(sid), nil
  local t = c[tf]
  if t and t >= 0 then
    c[tf] = t + d
    sets = {tf, string.format('%.0f', t + d)}
    move(m, sid, t, t + d)
  else
    move(m, sid, own - d, own)
  end
  for _, a in ipairs(ancestors(sid)) do
    local b = total_of(c, a)
    local ta = tfield(a)
    c[ta] = b + d
    sets = sets or {}
    sets[#sets + 1], sets[#sets + 2] = ta, string.format('%.0f', b + d)
    move(m, a, b, b + d)
    if not ups_hit[a] then
      ups_hit[a] = true
      ups_hit[#ups_hit + 1] = a
    end
  end
  if sets then call('HSET', pk, unpack(sets)) end
end

local function flush()
  if events_added > 0 then
    call('XTRIM', EVENTS, 'MAXLEN', '~', limits[1])
    events_budget(E, limits, events_added)
  end
  if #records > 0 then call_many('HSET', KEYS[6], records, 4000) end
  for _, lb in ipairs(board_list) do
    if #gone[lb] > 0 then call_many('ZREM', lb, gone[lb], 4000) end
    if #added[lb] > 0 then call_many('ZADD', lb, added[lb], 4000) end
  end
end

-- Whether each member and skill the call names is the entity's: one read of each hash for the
-- whole call (no award changes either), made when the first award gets past its gate.
-- member_at[m], skill_at[s]: the name's place in the list read.
local members_named, skills_named, member_at, skill_at = {}, {}, {}, {}
local member_entry, skill_entry
local function known()
  if member_entry then return end
  member_entry = call_many('HMGET', KEYS[4], members_named, 2000)
  skill_entry = call_many('HMGET', KEYS[5], skills_named, 2000)
end

-- XP and scores stay at most 2^53 - 1 (CONTRACT §12), what a double holds exactly and what the
-- boards' 16 digits and the API's JSON numbers assume. HINCRBY itself is exact to 2^63, so the
-- stored value is read and compared before anything is added: value > MAX - (what the award
-- adds to it up to this contribution), all exact in a double. The award's contributions are
-- checked in order; the first one that would pass the bound is named, and nothing is written.
-- Returns nil, or the error 'OVER <i> <field> <message>'.
local MAX_VALUE = 9007199254740991
local function bounded(first, n)
  local want, p = nil, first
  for _ = 1, n do
    local m, ns = ARGV[p + 1], num(ARGV[p + 3])
    local c = cur_of[m]
    if not c then
      c = {}
      cur_of[m] = c
    end
    for j = 0, ns do
      local f
      if j == 0 then
        f = ARGV[p + 2] ~= '0' and 'xp' or nil
      else
        local sid = ARGV[p + 2 + 2 * j]
        f = sfield_of[sid]
        if not f then
          f = 's:' .. sid
          sfield_of[sid] = f
        end
      end
      if f and c[f] == nil then
        want = want or {}
        local w = want[m]
        if not w then
          w = {}
          want[m] = w
        end
        c[f] = false -- asked once
        w[#w + 1] = f
      end
      -- in a tree, the totals of the skill and its ancestors too
      if j > 0 and tree then
        local sid = ARGV[p + 2 + 2 * j]
        local more = {tfield(sid)}
        for _, a in ipairs(ancestors(sid)) do
          more[#more + 1] = sfield(a)
          more[#more + 1] = tfield(a)
        end
        for _, g in ipairs(more) do
          if c[g] == nil then
            want = want or {}
            local w = want[m]
            if not w then
              w = {}
              want[m] = w
            end
            c[g] = false
            w[#w + 1] = g
          end
        end
      end
    end
    p = p + 4 + 2 * ns
  end
  if want then
    for m, fields in pairs(want) do
      local got = call_many('HMGET', prog_key(E, m), fields, 2000)
      local c = cur_of[m]
      for i, f in ipairs(fields) do
        if string.byte(f, 1) == 116 then -- 't': an absent total is -1
          c[f] = got[i] and tonumber(got[i]) or -1
        else
          c[f] = tonumber(got[i] or '0') or 0
        end
      end
    end
  end
  local adds = (n > 1 or tree) and {} or nil
  p = first
  for i = 1, n do
    local m, ns = ARGV[p + 1], num(ARGV[p + 3])
    local c = cur_of[m]
    for j = 0, ns do
      local f, delta, field
      if j == 0 then
        if ARGV[p + 2] ~= '0' then f, delta, field = 'xp', num(ARGV[p + 2]), 'xp' end
      else
        f, delta = sfield_of[ARGV[p + 2 + 2 * j]], num(ARGV[p + 3 + 2 * j])
        field = 'skills[' .. (j - 1) .. '].score'
      end
      if f then
        local sum = delta
        if adds then
          local key = m .. ' ' .. f
          sum = (adds[key] or 0) + delta
          adds[key] = sum
        end
        if c[f] > MAX_VALUE - sum then
          return fail('OVER', (i - 1) .. ' ' .. field .. ' would take the member\'s ' ..
            (j == 0 and 'XP' or 'score') .. ' past 9007199254740991 (2^53 - 1).')
        end
        -- in a tree, every total the score joins stays within the bound too
        if j > 0 and tree then
          local sid = ARGV[p + 2 + 2 * j]
          local ups = ancestors(sid)
          for u = 0, #ups do
            local x = u == 0 and sid or ups[u]
            local key = m .. ' t ' .. x
            local tsum = (adds[key] or 0) + delta
            adds[key] = tsum
            if total_of(c, x) > MAX_VALUE - tsum then
              return fail('OVER', (i - 1) .. ' ' .. field .. ' would take the member\'s ' ..
                'total in skill ' .. x .. ' past 9007199254740991 (2^53 - 1).')
            end
          end
        end
      end
    end
    p = p + 4 + 2 * ns
  end
  return nil
end

local used_of = {} -- each member's count of awards this minute, as read or written this call
local function rate_key(m)
  local k = rate_of[m]
  if not k then
    k = E .. ':awards:' .. m
    rate_of[m] = k
  end
  return k
end

-- One award: idem its idempotency key (nil without one), a the index of its first argument.
-- Contribution i's fields (id, member, xp, skill count, then each skill's id and score) are
-- read where they lie, one contribution after the other: no table per contribution or skill.
local function award(idem, a)
  local digest, n, first = ARGV[a], num(ARGV[a + 1]), a + 2
  local denied = gate()
  if denied then return denied end
  if idem then
    local held = call('GET', idem)
    if held then
      local nl = string.find(held, '\n', 1, true)
      if nl and string.sub(held, 1, nl - 1) == digest then
        return 'REPLAY ' .. string.sub(held, nl + 1)
      end
      return fail('CONFLICT', 'The idempotencyKey was used for another request.')
    end
  end
  known()
  local p = first
  for i = 1, n do
    if not member_entry[member_at[ARGV[p + 1]]] then
      return fail('INVALID', (i - 1) .. ' member is not a member of this entity.')
    end
    local ns = num(ARGV[p + 3])
    for j = 1, ns do
      if not skill_entry[skill_at[ARGV[p + 2 + 2 * j]]] then
        return fail('INVALID', (i - 1) .. ' skills[' .. (j - 1) ..
          '].skillId is not a skill of this entity.')
      end
    end
    p = p + 4 + 2 * ns
  end
  local f = p -- the first record; the events follow the records
  ups_hit = {}
  -- Awards per member and minute: a counter per member that expires a minute after the first
  -- award it counts (a fixed window), in the entity's slot.
  local counts
  if per_minute > 0 then
    counts = {}
    p = first
    for _ = 1, n do
      local m = ARGV[p + 1]
      counts[m] = (counts[m] or 0) + 1
      p = p + 4 + 2 * num(ARGV[p + 3])
    end
    for m, c in pairs(counts) do
      local used = used_of[m]
      if used == nil then
        used = tonumber(call('GET', rate_key(m)) or '0')
        used_of[m] = used
      end
      if used + c > per_minute then
        local ttl = call('PTTL', rate_key(m))
        return fail('RATE', math.max(1, math.ceil(ttl / 1000)) .. ' ' .. m ..
          ' may receive at most ' .. per_minute .. ' contributions per minute.')
      end
    end
  end
  board_tree_of()
  local over = bounded(first, n)
  if over then return over end
  -- one contribution (most awards) needs no table: its member is the one touched
  local touched, order, xp_of, xp_one, pk_one
  if n > 1 then touched, order, xp_of = {}, {}, {} end
  p = first
  for i = 1, n do
    local id, m, xp = ARGV[p], ARGV[p + 1], ARGV[p + 2]
    local ns = nums[ARGV[p + 3]] or num(ARGV[p + 3])
    local r = #records
    records[r + 1], records[r + 2] = id, ARGV[f + i - 1]
    call('ZADD', E .. ':contribs:of:' .. m, '0', stamp .. id)
    local pk, after = prog_key(E, m), nil
    if xp ~= '0' then after = progress(pk, m, 'xp', 'xp', xp) end
    for j = 1, ns do
      local sid = ARGV[p + 2 + 2 * j]
      local sf = sfield_of[sid]
      if not sf then
        sf = 's:' .. sid
        sfield_of[sid] = sf
      end
      if tree then
        tree_progress(pk, m, sid, sf, ARGV[p + 3 + 2 * j])
      else
        progress(pk, m, sf, sid, ARGV[p + 3 + 2 * j])
      end
    end
    -- emit's command, with the events key built once a call; the stream is trimmed once, at
    -- the end of the call (flush): the same stream, three arguments and a trim check an award
    -- less
    local data = ARGV[f + n + i - 1]
    call('XADD', EVENTS, '*', 'type', 'contribution.added', 'at', now_iso, 'actor', caller,
      'data', data)
    events_added = events_added + #data + event_overhead
    if n > 1 then
      if after then xp_of[m] = after end
      if not touched[m] then
        touched[m] = true
        order[#order + 1] = m
      end
    else
      xp_one, pk_one = after, pk
    end
    p = p + 4 + 2 * ns
  end
  -- Levels newly reached by the members this award touched, in level order (XP, then id),
  -- judged on the progression template (_prelude.lua).
  if n > 1 then
    for _, m in ipairs(order) do
      judge_levels(prog_key(E, m), m, xp_of[m])
    end
  else
    judge_levels(pk_one, ARGV[first + 1], xp_one)
  end
  for m, c in pairs(counts or {}) do
    local rk = rate_key(m)
    local v = call('INCRBY', rk, c)
    used_of[m] = v
    -- a counter INCRBY made just now (none is ever left without its expiry)
    if v == c then call('PEXPIRE', rk, '60000') end
  end
  if idem then
    local answer = n == 1 and '[' .. ARGV[f] .. ']' or
      '[' .. table.concat(ARGV, ',', f, f + n - 1) .. ']'
    call('SET', idem, digest .. '\n' .. answer, 'EX', 86400)
  end
  if #ups_hit > 0 then return 'OK ' .. table.concat(ups_hit, ' ') end
  return 'OK'
end

-- The members and skills the awards name, and the members named more than once.
local k, a = 10, 8
for _ = 1, num(ARGV[7]) do
  local nargs = num(ARGV[a + 1])
  local f = a + 4
  for _ = 1, num(ARGV[a + 3]) do
    local m = ARGV[f + 1]
    if member_at[m] then
      twice[m] = true
    else
      local at = #members_named + 1
      members_named[at], member_at[m] = m, at
    end
    local ns = num(ARGV[f + 3])
    for j = 1, ns do
      local sid = ARGV[f + 2 + 2 * j]
      if not skill_at[sid] then
        local at = #skills_named + 1
        skills_named[at], skill_at[sid] = sid, at
      end
    end
    f = f + 4 + 2 * ns
  end
  a = a + 2 + nargs
end

local replies = {}
a = 8
for i = 1, num(ARGV[7]) do
  local nkeys, nargs = num(ARGV[a]), num(ARGV[a + 1])
  replies[i] = award(nkeys > 0 and KEYS[k] or nil, a + 2)
  k, a = k + nkeys, a + 2 + nargs
end
flush()
return replies
