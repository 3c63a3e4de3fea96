-- sweep_step: one bounded step of the sweeper (jobs/sweeper.h): takes up to ARGV[1] removed
-- members' entries off the boards of one entity: first those tombstoned in a board's gone zset
-- (keys.h: lb:…:gone; the XP board's, and every board's of an earlier version's removals),
-- board by board from the top of each gone zset, each with its tombstone; then, member by
-- member, the skill board entries of the members in the unswept set (keys.h: lb:unswept),
-- found from their prog hashes.
-- Why gone zsets in board order, not member by member: a gone zset's first entries are
-- neighbours on the board too, so each ZREM walks the skiplist close to where the one before
-- it did, through nodes still in the CPU's caches, and the tombstones go with one
-- ZREMRANGEBYRANK. Member by member, every ZREM starts cold at a random place of a board of up
-- to millions of entries: about 3 times the cost (bench/RESULTS.md, 2026-11-27 14:27). The
-- unswept members' entries are sorted per board within the step, which gives back a little of
-- that; a removal tombstoning them all paid more in the request than this costs here.
-- A tombstone whose address is a member again should not exist (force_add.lua takes a re-added
-- member's tombstones back). One can, during a rolling upgrade: an earlier version's revocation
-- moved a removed member's progress but not its tombstoned entry, and the member was then added
-- again. Such a tombstone goes; its board entry stays only if it is the member's progress as it
-- is now. An unswept member that is a member again (added back) has its entries listed: it only
-- leaves the set.
-- Which boards: those the entity's tombstoned set lists (keys.h; a removal adds the XP board
-- when it tombstoned there, and a step drops those it found empty), so a step reads no board
-- without work however many skills the entity has (every board at 1,000 skills cost about 1 ms
-- a step). Sweep records (written by an earlier version's removals only, _prelude.lua
-- sweep_record) mean tombstones that no set lists: while the sweep zset exists every board is
-- read, as before. Records are not read here: once every board's gone zset is empty, all of
-- them are stale (every entry they list is off its board), and they go together. Until then
-- force_add.lua still reads a record to take a re-added member's tombstones back (a tombstone
-- already swept is a ZREM of nothing).
-- Writes nothing but removals, so a deleted entity (its hash gone) is left to its erasure.
-- Then, with what is left of the budget, a step of a board rebuild (keys.h: lb:rebuild; a move
-- or a deletion in the skill tree started it, _prelude.lua board_rebuild_start): the members
-- hash's next few members by HSCAN (a cursor kept in lb:rebuild), each one's "t:" fields and
-- entries on the boards being rebuilt set to its exact totals (board_exact). The step holds a
-- lease (lb:rebuild's lease and leaseUntil, Redis's clock) renewed at each step: an instance
-- meeting another's lease in force leaves the rebuild to it ('HELD'); a dead instance's lease
-- runs out and the next step of any instance takes over at the cursor. Members added meanwhile
-- are listed exact by force_add.lua; removed ones keep entries where their fields put them,
-- which is where the sweeper takes them off. The last step (the cursor back at 0) drops the
-- rebuild's keys and the entity hash's lbRebuild: every listed member was set exact after
-- the last move, and every award since moved it from there.
-- KEYS: entity, sweep zset (an earlier version's records), members
-- ARGV: most board entries to take off (an unswept member's counting twice, below; a member a
-- rebuild sets, 2 per board it rebuilds), this instance's lease token, the lease's ms, and the
-- most entries a rebuild's step may set (BOARD_REBUILD_STEP_ENTRIES, within the first)
-- Returns {'NONE', 0, 0} (no such entity), or {'MORE'|'DONE'|'HELD', entries taken off or
-- members rebuilt, tombstones, unswept members and rebuilds left}, or {'REBUILD', the same two,
-- the step's own time in Redis in µs}: 'MORE' after a step that rebuilt boards, which the
-- sweeper paces by that time (BOARD_REBUILD_PAUSE_FACTOR), not by a round trip a busy loop
-- lengthens.
local E = KEYS[1]
local moving = moving_guard(E)
if moving then return moving end
if redis.call('EXISTS', E) == 0 then return {'NONE', 0, 0} end
local budget, swept, left = tonumber(ARGV[1]), 0, 0
local t0 = redis.call('TIME')
local listed = tombstoned_key(E)
-- An earlier version's sweep records mean tombstones that no set lists: every board is read
-- until none is left. Otherwise only the boards the set lists.
local legacy = redis.call('EXISTS', KEYS[2]) == 1
local boards
if legacy then
  boards = redis.call('HKEYS', E .. ':skills')
  table.insert(boards, 1, 'xp')
else
  boards = redis.call('SMEMBERS', listed)
end
local empty = {}
for _, by in ipairs(boards) do
  local g = gone_key(E, by)
  if budget > 0 then
    local es = redis.call('ZRANGE', g, 0, budget - 1)
    if #es > 0 then
      local addrs, off = {}, {}
      for i, e in ipairs(es) do addrs[i] = string.sub(e, 18) end
      local live = redis.call('HMGET', KEYS[3], unpack(addrs))
      for i, e in ipairs(es) do
        if not live[i] then
          off[#off + 1] = e
        else
          local v
          if by == 'xp' then
            v = tonumber(redis.call('HGET', prog_key(E, addrs[i]), 'xp')) or 0
          else -- its total once a skill below gave it one (board_value)
            local got = redis.call('HMGET', prog_key(E, addrs[i]), 't:' .. by, 's:' .. by)
            v = tonumber(got[1] or got[2] or '0') or 0
          end
          if v <= 0 or lb_member(v, addrs[i]) ~= e then off[#off + 1] = e end
        end
      end
      if #off > 0 then redis.call('ZREM', lb_key(E, by), unpack(off)) end
      redis.call('ZREMRANGEBYRANK', g, 0, #es - 1)
      budget, swept = budget - #es, swept + #es
    end
  end
  local n = redis.call('ZCARD', g)
  if n == 0 then empty[#empty + 1] = by end
  left = left + n
end

-- The unswept members, a few at a time (a member's entries go in one step, so a step may pass
-- the budget by one member's skills): each one's skill entries at its progress now, sorted per
-- board; a deleted skill's score has no board. Such an entry, at a random place of its board,
-- costs about twice one taken in board order, so it counts twice against the budget, which
-- keeps a step as short as a step of tombstones (bench/RESULTS.md, 2026-12-01).
local uk = unswept_key(E)
if budget > 0 then
  local ws = redis.call('SRANDMEMBER', uk, math.ceil(budget / 16))
  if #ws > 0 then
    local live = redis.call('HMGET', KEYS[3], unpack(ws))
    local per, boards_of, done, skill = {}, {}, {}, {}
    for i, a in ipairs(ws) do
      if budget <= 0 then break end
      done[#done + 1] = a
      if not live[i] then
        local flat = redis.call('HGETALL', prog_key(E, a))
        -- a skill's entry is at its total once a skill below gave it one ("t:", board_value),
        -- else at its own score: a "t:" field wins over the "s:" one, each skill taken once
        local h, order = {}, {}
        for j = 1, #flat, 2 do
          local f = flat[j]
          local kind = string.sub(f, 1, 2)
          if kind == 't:' or kind == 's:' then
            local sid = string.sub(f, 3)
            if h[sid] == nil then order[#order + 1] = sid end
            if kind == 't:' or h[sid] == nil then h[sid] = flat[j + 1] end
          end
        end
        for _, sid in ipairs(order) do
          local v = tonumber(h[sid])
          if v and v > 0 then
            if skill[sid] == nil then
              skill[sid] = redis.call('HEXISTS', E .. ':skills', sid) == 1
            end
            if skill[sid] then
              local es = per[sid]
              if not es then
                es = {}
                per[sid] = es
                boards_of[#boards_of + 1] = sid
              end
              es[#es + 1] = lb_member(v, a)
              budget, swept = budget - 2, swept + 1
            end
          end
        end
      end
    end
    for _, sid in ipairs(boards_of) do
      local es = per[sid]
      table.sort(es)
      call_many('ZREM', lb_key(E, sid), es, 4000)
    end
    call_many('SREM', uk, done, 4000)
  end
end
left = left + redis.call('SCARD', uk)

local rb, rebuilt = E .. ':lb:rebuild:boards', false
if redis.call('EXISTS', rb) == 1 then
  local rk, token, lease = E .. ':lb:rebuild', ARGV[2] or '', tonumber(ARGV[3]) or 10000
  local st = redis.call('HMGET', rk, 'lease', 'leaseUntil', 'cursor')
  local now = redis_now_ms()
  if st[1] and st[1] ~= token and (tonumber(st[2]) or 0) > now then
    return {'HELD', swept, left + 1}
  end
  local done = false
  budget = math.min(budget, tonumber(ARGV[4]) or budget)
  if budget > 0 then
    rebuilt = true
    local only, n = {}, 0
    for _, b in ipairs(redis.call('SMEMBERS', rb)) do
      only[b] = true
      n = n + 1
    end
    local tree = board_tree(redis.call('HGET', E, 'progtpl'), true)
    local r = redis.call('HSCAN', KEYS[3], st[3] or '0', 'COUNT',
      math.max(1, math.floor(budget / (2 * n + 2))))
    local flat, moves = r[2], {}
    for i = 1, #flat, 2 do
      board_exact(E, flat[i], tree, only, nil, nil, moves)
      swept = swept + 1
    end
    board_moves_apply(E, moves)
    if r[1] == '0' then
      redis.call('DEL', rb, rk)
      redis.call('HDEL', E, 'lbRebuild')
      done = true
    else
      redis.call('HSET', rk, 'cursor', r[1], 'lease', token, 'leaseUntil', now + lease)
    end
  end
  if not done then left = left + 1 end
end
if left > 0 then
  if not legacy and #empty > 0 then call_many('SREM', listed, empty, 4000) end
  if rebuilt then
    local t1 = redis.call('TIME')
    return {'REBUILD', swept, left, (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])}
  end
  return {'MORE', swept, left}
end
redis.call('UNLINK', KEYS[2], listed)
return {'DONE', swept, 0}
