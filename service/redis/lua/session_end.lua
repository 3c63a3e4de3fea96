-- session_end: ends one session of an address (CONTRACT section 13).
-- KEYS[1] auth:sess:{<address>}   ARGV[1] id   ARGV[2] the token's hash, or '' (any record)
-- Returns 1 when a live session was ended, 0 when there was none (or the hash differs).
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return 0 end
if ARGV[2] ~= '' then
  local h = rec:match('^%d+:%d+:%a:(%x+):')
  if h ~= ARGV[2] then return 0 end
end
redis.call('HDEL', KEYS[1], ARGV[1], 'u:' .. ARGV[1], 'a:' .. ARGV[1])
local t = redis.call('TIME')
local e = tonumber(rec:match('^(%d+):'))
return (e and e > tonumber(t[1]) * 1000) and 1 or 0
