-- standalone
-- joins_forget: drops an entity from the joins registry (keys.h) once its re-check found no
-- entity or no rule, unless a join listed it earlier since (a join's ZADD LT lowers the score
-- below the one read). Its own slot, no entity key.
-- KEYS: the joins registry
-- ARGV: entity id, the score read (ms)
-- Returns 1 when dropped.
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) >= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
