-- standalone
-- sweep_forget: drops an entity's entry from the sweeps set (keys.h) once the sweeper found
-- its tombstones all gone, unless a removal listed it again since: only while its score is
-- still the one the sweeper read (a removal's ZADD GT moves it on). Its own slot, no entity key.
-- KEYS: the sweeps set
-- ARGV: entity id, the score read (ms)
-- Returns 1 when dropped.
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
