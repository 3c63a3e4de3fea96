-- find_wallet_drop: removes a wallet's index entries that no longer hold, AFTER the entity
-- showed it (a read's check, or a removal already committed). An entry touched by an add
-- within the grace period stays: its entity write may still be on its way, and the next read
-- checks it again. So a drop never undoes an add whose write is answered.
-- KEYS: meta, any, owner, admin, member (one wallet)
-- ARGV: grace (ms), then per entry: entity id, since (16 digits; '' = the one stored), the
--       role letters to drop (of o, a, m), '1' to drop it from the wallet's list altogether
-- Returns the number of entries skipped as too recently touched.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local grace = tonumber(ARGV[1])
local roles = {o = KEYS[3], a = KEYS[4], m = KEYS[5]}
local skipped = 0
for i = 2, #ARGV - 3, 4 do
  local id, since = ARGV[i], ARGV[i + 1]
  local cur = redis.call('HGET', KEYS[1], id)
  local s, touched = nil, nil
  if cur then s, touched = string.match(cur, '^(%d+) (%d+)') end
  if touched and now - tonumber(touched) < grace then
    skipped = skipped + 1
  else
    if since == '' then since = s end
    if since then
      local entry = since .. ':' .. id
      for l in string.gmatch(ARGV[i + 2], '[oam]') do redis.call('ZREM', roles[l], entry) end
      if ARGV[i + 3] == '1' then
        for _, k in pairs(roles) do redis.call('ZREM', k, entry) end
        redis.call('ZREM', KEYS[2], entry)
        if s == since then redis.call('HDEL', KEYS[1], id) end
      end
    end
  end
end
return skipped
