-- credential_touch: records the minute a session or an entity API key was last used (CONTRACT
-- section 13), in the hash that holds its record (field <id>) beside it (field u:<id>).
-- KEYS[1] auth:sess:{<address>} or ent:{c-…}:apikeys   ARGV[1] its id   ARGV[2] the minute, ms
-- Only while the record is there: a touch that arrives after the session ended (DELETE,
-- revoke-all, its expiry) or the key was deleted must not bring a field of it back. Never moves
-- the minute backwards (two instances may touch at once). Returns 1 when written, else 0.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local field = 'u:' .. ARGV[1]
local last = tonumber(redis.call('HGET', KEYS[1], field))
local minute = tonumber(ARGV[2])
if minute == nil or (last ~= nil and last >= minute) then
  return 0
end
redis.call('HSET', KEYS[1], field, ARGV[2])
return 1
