-- find_wallet_drop: removes wallets' index entries that no longer hold, AFTER the entity showed
-- it (a read's check, or a removal already committed). An entry touched by an add within the
-- grace period stays: its entity write may still be on its way, and the next read checks it
-- again. So a drop never undoes an add whose write is answered.
-- The drops of one loop turn leave as one call outside Redis Cluster (a group, redis/group.h),
-- one per wallet in it (jobs/indexes.h): each call of the group is one wallet's.
-- KEYS: per call, in turn: meta, any, owner, admin, member (one wallet)
-- ARGV: grace (ms); the number of calls; then each call's key count (5), argument count and
--       arguments: per entry, entity id, since (16 digits; '' = the one stored), the role
--       letters to drop (of o, a, m), '1' to drop it from the wallet's list altogether
-- Returns, per call, the number of entries skipped as too recently touched.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local grace = tonumber(ARGV[1])
local out, k, at = {}, 0, 3
for c = 1, tonumber(ARGV[2]) do
  local nkeys, nargs = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  local first = at + 2
  local meta, any = KEYS[k + 1], KEYS[k + 2]
  local roles = {o = KEYS[k + 3], a = KEYS[k + 4], m = KEYS[k + 5]}
  local skipped = 0
  for i = first, first + nargs - 4, 4 do
    local id, since = ARGV[i], ARGV[i + 1]
    local cur = redis.call('HGET', meta, id)
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
          for _, key in pairs(roles) do redis.call('ZREM', key, entry) end
          redis.call('ZREM', any, entry)
          if s == since then redis.call('HDEL', meta, id) end
        end
      end
    end
  end
  out[c] = skipped
  k, at = k + nkeys, first + nargs
end
return out
