-- alias_claim: takes a community alias for an entity, or reports who holds it.
-- The key holds "<entity id> <claimed at: Redis TIME, seconds>".
-- KEYS: alias   ARGV: entity id, stale value ('' or the exact value the caller found stale)
-- Returns '+' when newly taken, '=' when this entity already held it, else
-- {holder id, claim age in seconds, the stored value}.
local now = tonumber(redis.call('TIME')[1])
local cur = redis.call('GET', KEYS[1])
if cur then
  local holder, at = string.match(cur, '^(%S+) (%d+)$')
  if not holder then holder, at = cur, '0' end
  if holder == ARGV[1] then return '=' end
  if ARGV[2] == '' or cur ~= ARGV[2] then
    return {holder, tostring(now - tonumber(at)), cur}
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. now)
return '+'
