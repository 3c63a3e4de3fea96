-- standalone (no prelude: this runs on every signed write, and costs what it defines)
-- rate_limit: one address's write budget or creation quota, as a GCRA (a token bucket kept as
-- one time stamp per limit: no refill loop). One key per address, in the address's own slot:
-- never combined with an entity's keys.
-- KEYS[1] limit:{<address>}, a hash: 'w' writes, 'c' creations, each the limit's theoretical
--         arrival time in microseconds of Redis's clock
-- ARGV[1] field ('w' or 'c'), ARGV[2] microseconds per unit (the window / units),
-- ARGV[3] burst (units that may be spent at once: the whole budget), ARGV[4] 'take' or 'give'.
-- take: returns 0 when admitted (and counts it), else the milliseconds until one unit is free
-- (nothing changed). give: hands back one unit taken by a request that was then refused.
-- Redis's clock, not the caller's, so every instance charges against the same time. The key
-- expires when both limits have refilled.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[2])
local both = redis.call('HMGET', KEYS[1], 'w', 'c')
local mine, other = both[1], both[2]
if ARGV[1] == 'c' then mine, other = both[2], both[1] end
local tat = tonumber(mine or '0') or 0
other = tonumber(other or '0') or 0
if ARGV[4] == 'give' then
  tat = tat - interval
  if tat <= now then
    redis.call('HDEL', KEYS[1], ARGV[1])
    return 0
  end
else
  if tat < now then tat = now end
  tat = tat + interval
  local free_at = tat - interval * tonumber(ARGV[3])
  if free_at > now then
    return math.ceil((free_at - now) / 1000)
  end
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', tat))
redis.call('PEXPIRE', KEYS[1], math.ceil((math.max(tat, other) - now) / 1000) + 1)
return 0
