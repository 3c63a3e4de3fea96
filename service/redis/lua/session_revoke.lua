-- session_revoke: ends the sessions of an address made from one signature (CONTRACT section 13:
-- revoking a signature ends its sessions).
-- KEYS[1] auth:sess:{<address>}   ARGV[1] the signature's revocation id
-- Returns how many were ended.
local all = redis.call('HGETALL', KEYS[1])
local n = 0
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if not f:find(':', 1, true) then
    local rid = v:match('^%d+:%d+:%a:%x+:(.*)$')
    if rid == ARGV[1] then
      redis.call('HDEL', KEYS[1], f, 'u:' .. f, 'a:' .. f)
      n = n + 1
    end
  end
end
return n
