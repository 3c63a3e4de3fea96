-- alias_claim: takes a community alias for an entity, or reports who holds it.
-- The key holds "<entity id> <claimed at: Redis TIME, seconds> <claim token>"; older releases
-- wrote "<entity id> <seconds>" or "<entity id>", still read (their claims have no token).
-- KEYS: alias   ARGV: entity id, stale value ('' or the exact value the caller found stale),
--       claim token (fresh random, per claim)
-- Every claim that succeeds stores the caller's token, also when this entity already held the
-- alias: a release (alias_release.lua) or a stale takeover names the exact claim it undoes, so
-- it can never undo a newer claim of the same entity whose write is still on its way.
-- Returns '+' when newly taken, '=' when this entity already held it, else
-- {holder id, claim age in seconds, the stored value}.
local now = tonumber(redis.call('TIME')[1])
local cur = redis.call('GET', KEYS[1])
local mine = false
if cur then
  local holder, at = string.match(cur, '^(%S+) (%d+)')
  if not holder then holder, at = cur, '0' end
  mine = holder == ARGV[1]
  if not mine and (ARGV[2] == '' or cur ~= ARGV[2]) then
    return {holder, tostring(now - tonumber(at)), cur}
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. now .. ' ' .. ARGV[3])
if mine then return '=' end
return '+'
