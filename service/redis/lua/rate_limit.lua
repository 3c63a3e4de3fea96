-- rate_limit: one address's write budget or creation quota, as a GCRA (a token bucket kept as
-- one time stamp: no refill loop, one field per limit). One key, so one slot: never combined
-- with an entity's keys.
-- KEYS[1] limit:{<address>}
-- ARGV[1] field ('w' writes, 'c' creations), ARGV[2] microseconds per unit (60e6 / per-minute),
-- ARGV[3] burst (units that may be used at once: the whole budget), ARGV[4] 'take' or 'give'.
-- take: returns 0 when admitted (and counts it), else the milliseconds until one unit is free
-- (nothing changed). give: hands back one unit taken by a request that was then refused.
-- Redis's clock, not the caller's, so every instance charges against the same time.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[2])
local tat = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') or 0
if ARGV[4] == 'give' then
  if tat - interval > now then
    redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', tat - interval))
  else
    redis.call('HDEL', KEYS[1], ARGV[1])
  end
  return 0
end
if tat < now then tat = now end
local new = tat + interval
local free_at = new - interval * tonumber(ARGV[3])
if free_at > now then
  return math.ceil((free_at - now) / 1000)
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', new))
local ttl = math.ceil((new - now) / 1000) + 1
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 0
