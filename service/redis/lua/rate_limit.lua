-- standalone (no prelude: this runs on every signed write, and costs what it defines)
-- rate_limit: one address's write budget or creation quota, as a GCRA (a token bucket kept as
-- one time stamp per limit: no refill loop). One key per address, in the address's own slot:
-- never combined with an entity's keys.
-- KEYS[1] limit:{<address>}, a string "<writes>:<creations>": each limit's theoretical arrival
--         time in microseconds of Redis's clock (0 when unused); one string, not a hash, so a
--         charge is two commands besides TIME (each call from a script costs about a microsecond)
-- ARGV[1] 'w' or 'c', ARGV[2] microseconds per unit (the window / units),
-- ARGV[3] burst (units that may be spent at once: the whole budget), ARGV[4] 'take' or 'give',
-- ARGV[5] units n (at least 1).
-- take: grants min(n, units free now) and returns {granted, wait}: wait is 0 when all n were
-- granted, else the milliseconds until one more unit is free. A partial grant is what lets a
-- process take units ahead of its writes (a lease) without ever granting more, over all
-- processes, than the budget holds. give: hands back n units taken and not spent.
-- Redis's clock, not the caller's, so every instance charges against the same time. The key
-- expires when both limits have refilled.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[2])
local n = math.max(math.floor(tonumber(ARGV[5]) or 1), 1)
local w, c = 0, 0
local v = redis.call('GET', KEYS[1])
if v then
  local sep = string.find(v, ':', 1, true)
  if sep then
    w = tonumber(string.sub(v, 1, sep - 1)) or 0
    c = tonumber(string.sub(v, sep + 1)) or 0
  end
end
local tat = ARGV[1] == 'c' and c or w
local granted, wait = 0, 0
if ARGV[4] == 'give' then
  tat = math.max(tat - interval * n, 0)
else
  if tat < now then tat = now end
  local burst = tonumber(ARGV[3])
  granted = n
  if interval > 0 then
    -- units free now: those whose arrival time fits in the burst ahead of now
    local free = math.floor((now + interval * burst - tat) / interval)
    if free < granted then granted = free end
  end
  if granted <= 0 then
    return {0, math.ceil((tat + interval - interval * burst - now) / 1000)}
  end
  tat = tat + interval * granted
  if granted < n then
    wait = math.ceil((tat + interval - interval * burst - now) / 1000)
  end
end
if ARGV[1] == 'c' then c = tat else w = tat end
local ttl = math.ceil((math.max(w, c) - now) / 1000) + 1
if ttl <= 1 then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.0f:%.0f', w, c), 'PX', ttl)
end
return {granted, wait}
