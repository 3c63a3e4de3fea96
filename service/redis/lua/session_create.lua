-- session_create: a new session of an address (CONTRACT section 13), made from a challenge
-- (which it consumes) or from an epoch signature.
-- KEYS[1] auth:sess:{<address>}   KEYS[2] auth:chal:{<address>}:<nonce> (a challenge's only)
-- ARGV[1] id  ARGV[2] expiresAtMs  ARGV[3] kind (c, e, w)  ARGV[4] token hash
-- ARGV[5] revocation id or '-'  ARGV[6] most live sessions  ARGV[7] User-Agent ('' for none)
-- Returns createdAtMs. Errors: GONE (the challenge is used or expired: 401).
-- Expired sessions are dropped, and the oldest live ones past the bound ended, here: the hash
-- never holds more than the bound, and dies (PEXPIREAT) with its longest-lived session.
if KEYS[2] and redis.call('DEL', KEYS[2]) == 0 then
  return fail('GONE', 'The challenge is used or expired; ask for a new one.')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = tonumber(ARGV[2])
local max = tonumber(ARGV[6])
if expires == nil or expires <= now then
  return fail('GONE', 'The signature has expired.')
end
local all = redis.call('HGETALL', KEYS[1])
local live, ids = {}, {}
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if not f:find(':', 1, true) then
    local e, c = v:match('^(%d+):(%d+):')
    e, c = tonumber(e), tonumber(c)
    if e == nil or e <= now then
      redis.call('HDEL', KEYS[1], f, 'u:' .. f, 'a:' .. f)
    else
      live[#live + 1] = {f, c, e}
      ids[f] = true
    end
  end
end
-- u:/a: fields whose session is gone (none should be: every end deletes all three)
for i = 1, #all, 2 do
  local f = all[i]
  local id = f:match('^[ua]:(.*)$')
  if id and not ids[id] then redis.call('HDEL', KEYS[1], f) end
end
table.sort(live, function(a, b) return a[2] < b[2] end)
local drop = #live - max + 1
for i = 1, drop do
  redis.call('HDEL', KEYS[1], live[i][1], 'u:' .. live[i][1], 'a:' .. live[i][1])
end
local latest = expires
for i = math.max(drop, 0) + 1, #live do
  if live[i][3] > latest then latest = live[i][3] end
end
redis.call('HSET', KEYS[1], ARGV[1],
  ARGV[2] .. ':' .. now .. ':' .. ARGV[3] .. ':' .. ARGV[4] .. ':' .. ARGV[5],
  'u:' .. ARGV[1], tostring(now - now % 60000))
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'a:' .. ARGV[1], ARGV[7]) end
redis.call('PEXPIREAT', KEYS[1], latest)
return now
