-- standalone
-- read_gate: a read that answers only a caller who may read it (CONTRACT §12, "reads check
-- rights first"). A refused caller gets the entity's flags and its own role lookups: a few
-- dozen bytes, whatever the events, skill tree or page behind them. Read-only: it runs only the
-- read commands listed in READS (a "#!lua flags=no-writes" line would say the same to Redis,
-- but Redis 6.2, which the service supports, cannot load it).
-- KEYS: entity, owners, admins, members, then the keys the read's commands read (each command
--       reads one, all in the entity's slot).
-- ARGV: rule, caller, platform ('1'|'0'), n, the n entity hash fields to read
--       (the first three: a field every entity has, isEnabled, public), then the read's
--       commands, each as: its argument count c, its name, the index in KEYS of its key, and
--       its c - 2 other arguments.
-- rule: 'r' the read rule of a signed caller (CONTRACT §3.3); 'e' the entity's owners and
--       admins (owners alone while it is disabled).
-- Returns {the HMGET, is owner, is admin, is member, each command's reply} when allowed, else
-- {the first three fields (the first '' when present), the three role lookups}. The service
-- judges access again from these and answers the refusal.
local rule, caller = ARGV[1], ARGV[2]
local platform, nf = ARGV[3] == '1', tonumber(ARGV[4])
local head = redis.call('HMGET', KEYS[1], ARGV[5], ARGV[6], ARGV[7])
local enabled, public = head[2] ~= '0', head[3] ~= '0'
local o, a, m = 0, 0, 0
if head[1] then
  o = redis.call('SISMEMBER', KEYS[2], caller)
  a = redis.call('SISMEMBER', KEYS[3], caller)
  m = redis.call('HEXISTS', KEYS[4], caller)
end
local ok = false
if not head[1] then
  ok = false
elseif rule == 'e' then
  ok = platform or o == 1 or (enabled and a == 1)
elseif not enabled then
  ok = platform or o == 1
else
  ok = public or platform or o + a + m > 0
end
if not ok then
  if head[1] then head[1] = '' end
  return {head, o, a, m}
end
if nf > 3 then
  local more = redis.call('HMGET', KEYS[1], unpack(ARGV, 8, 4 + nf))
  for i = 1, #more do head[3 + i] = more[i] end
end
local out = {head, o, a, m}
local READS = {XRANGE = true, XREVRANGE = true, ZRANGEBYLEX = true, ZLEXCOUNT = true, ZCARD = true, SCARD = true,
  HEXISTS = true, HGET = true, HMGET = true, SISMEMBER = true}
local i = 5 + nf
while i <= #ARGV do
  local c = tonumber(ARGV[i])
  local args = {ARGV[i + 1], KEYS[tonumber(ARGV[i + 2])]}
  for j = 3, c do args[j] = ARGV[i + j] end
  if READS[args[1]] then
    out[#out + 1] = redis.pcall(unpack(args))
  else
    out[#out + 1] = redis.error_reply('ERR read_gate: not a read: ' .. tostring(args[1]))
  end
  i = i + 1 + c
end
return out
