-- sweep_step: one bounded step of the sweeper (jobs/sweeper.h): takes up to ARGV[1] removed
-- members' entries off the boards of one entity, each with its tombstone (keys.h: lb:…:gone),
-- board by board, from the top of each board's gone zset.
-- Why in board order, not member by member: a gone zset's first entries are neighbours on the
-- board too, so each ZREM walks the skiplist close to where the one before it did, through
-- nodes still in the CPU's caches, and the tombstones go with one ZREMRANGEBYRANK. Member by
-- member, every ZREM started cold at a random place of a board of up to millions of entries:
-- about 3 times the cost (bench/RESULTS.md, 2026-11-27 14:27).
-- A tombstone whose address is a member again should not exist (force_add.lua takes a re-added
-- member's tombstones back). One can, during a rolling upgrade: an earlier version's revocation
-- moved a removed member's progress but not its tombstoned entry, and the member was then added
-- again. Such a tombstone goes; its board entry stays only if it is the member's progress as it
-- is now.
-- Sweep records (written by an earlier version's removals only, _prelude.lua sweep_record) are
-- not read here. Once every board's gone zset is empty, all of them are stale (every entry they
-- list is off its board), and they go together. Until then force_add.lua still reads a record
-- to take a re-added member's tombstones back (a tombstone already swept is a ZREM of nothing).
-- Writes nothing but removals, so a deleted entity (its hash gone) is left to its erasure.
-- KEYS: entity, sweep zset, members
-- ARGV: most board entries to take off
-- Returns {'NONE', 0, 0} (no such entity), or {'MORE'|'DONE', entries taken off, tombstones
-- left}.
local E = KEYS[1]
local moving = moving_guard(E)
if moving then return moving end
if redis.call('EXISTS', E) == 0 then return {'NONE', 0, 0} end
local budget, swept, left = tonumber(ARGV[1]), 0, 0
local boards = redis.call('HKEYS', E .. ':skills')
table.insert(boards, 1, 'xp')
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
          local v = tonumber(redis.call('HGET', prog_key(E, addrs[i]),
            by == 'xp' and 'xp' or 's:' .. by)) or 0
          if v <= 0 or lb_member(v, addrs[i]) ~= e then off[#off + 1] = e end
        end
      end
      if #off > 0 then redis.call('ZREM', lb_key(E, by), unpack(off)) end
      redis.call('ZREMRANGEBYRANK', g, 0, #es - 1)
      budget, swept = budget - #es, swept + #es
    end
  end
  left = left + redis.call('ZCARD', g)
end
if left > 0 then return {'MORE', swept, left} end
redis.call('UNLINK', KEYS[2])
return {'DONE', swept, 0}
