-- find_wallet_undo: takes back what find_wallet_add.lua wrote for an entity write that was then
-- refused (CONTRACT §12), sent by the same request before it answers. Only while the meta
-- entry is still the one this request wrote (it holds the request's random mark): an add of
-- another request since then (whose write may have succeeded) keeps everything. What was there
-- before this request stays: the meta entry goes back to it, and only the lists that gained the
-- entry lose it.
-- KEYS: meta, any, owner, admin, member of one wallet, or of several in turn (outside Redis
--       Cluster only)
-- ARGV: per wallet: entity id, the meta entry written, the one before ('' = none), the letters
--       of the lists that gained the entry (find_wallet_add.lua's answer)
-- Returns the number of wallets undone.
local moving = moving_guard(KEYS[1])
if moving then return moving end
local undone = 0
for w = 0, #KEYS - 5, 5 do
  local a = w / 5 * 4
  local id, written, prior, gained = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  if redis.call('HGET', KEYS[w + 1], id) == written then
    local entry = string.match(written, '^(%d+)') .. ':' .. id
    local lists = {n = KEYS[w + 2], o = KEYS[w + 3], a = KEYS[w + 4], m = KEYS[w + 5]}
    for l in string.gmatch(gained, '[noam]') do redis.call('ZREM', lists[l], entry) end
    if prior == '' then
      redis.call('HDEL', KEYS[w + 1], id)
    else
      redis.call('HSET', KEYS[w + 1], id, prior)
    end
    undone = undone + 1
  end
end
return undone
