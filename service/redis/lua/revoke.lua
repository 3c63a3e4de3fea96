-- revoke: marks a signature revoked until it would have expired anyway.
-- KEYS[1] auth:revoked:<r||s>   ARGV[1] expiry, Unix seconds
-- Returns 1 when newly revoked, 0 when it already was. An expiry in the past stores nothing.
local expiry = tonumber(ARGV[1])
local now = tonumber(redis.call('TIME')[1])
if expiry == nil or expiry <= now then
  return 0
end
if redis.call('SET', KEYS[1], '1', 'NX', 'EXAT', expiry) then
  return 1
end
return 0
