-- sweep_step: one bounded step of the sweeper (jobs/sweeper.h): takes removed members' board
-- entries and their tombstones off, for up to ARGV[1] sweep records of one entity (keys.h: sweep,
-- lb:…:gone). Each record names its entries exactly as the removal tombstoned them, so a
-- revocation since (it moves only the progress of a removed member) changes nothing here. A
-- record whose address is a member again should not exist (force_add.lua takes it back), and
-- its board entries are then left as they are. At most a few ZREMs per board of each record:
-- ARGV[1] bounds the step's time, whatever the entity's size. Writes nothing but removals, so a
-- deleted entity (its hash gone) is left to its erasure.
-- KEYS: entity, sweep zset, members
-- ARGV: most records to sweep
-- Returns {'NONE', 0, 0} (no such entity), or {'MORE'|'DONE', records swept, records left}.
local E = KEYS[1]
local moving = moving_guard(E)
if moving then return moving end
if redis.call('EXISTS', E) == 0 then return {'NONE', 0, 0} end
local recs = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)
for _, rec in ipairs(recs) do
  local addr = string.match(rec, '^(%S+)')
  local live = redis.call('HEXISTS', KEYS[3], addr) == 1
  for by, inv in string.gmatch(rec, ' ([^ =]+)=(%d+)') do
    local e = inv .. ':' .. addr
    if not live then redis.call('ZREM', lb_key(E, by), e) end
    redis.call('ZREM', gone_key(E, by), e)
  end
  redis.call('ZREM', KEYS[2], rec)
end
local left = redis.call('ZCARD', KEYS[2])
return {left > 0 and 'MORE' or 'DONE', #recs, left}
