-- join_verdicts: the verdicts of one batch of an entity's re-check of its join rule (CONTRACT
-- section 16, "Staying true"; jobs/joinsweep.h), all applied at once. Per member: a pass ends
-- its failing record (keys.h: join:failing); a failure removes at once a member who joined less
-- than the grace ago (no grace for one who never held), else starts its failing record, or
-- removes it once the grace has run since that record began; an error (a leaf or a chain that
-- did not answer) neither counts nor resets. Each one kept is due again a period on (keys.h:
-- join:due). A removal is section 8's (_prelude.lua, removal_take and removal_finish), with
-- one event member.lapsed {address, leaves: the failing leaves} per member.
-- Left alone: a member no longer due from this batch (removed, force-added, checked or joined
-- again since the take: its due is then past the latest due the take took), and everything when the lease is
-- another instance's now (its own take holds these members) or the rule changed since the take
-- (the next take checks them by the rule in force). A due entry of an address that is no rules
-- member (should not exist) only goes.
-- KEYS: entity, members, member order, join rule hash, join:due, join:failing, join:lease
-- ARGV: events limits, lease token, lease ms, period ms, grace ms, the latest due taken, the
-- rule's ver at the take, a fresh random membersVersion, then per member: address, verdict
-- ('p' pass, 'f' fail, 'e' error), the failing leaves as a JSON array ('' unless 'f').
-- Returns {'NONE'|'LOST'|'STALE'|'OK', the earliest due ms left (-1 none), the script's µs,
-- {boards whose reads changed ('xp')}, {removed address...}}.
local E, M, ORDER, J, DUE, FAILING, LEASE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6],
  KEYS[7]
local moving = moving_guard(E)
if moving then return moving end
local t0 = redis.call('TIME')
local function elapsed()
  local t1 = redis.call('TIME')
  return (tonumber(t1[1]) - tonumber(t0[1])) * 1000000 + tonumber(t1[2]) - tonumber(t0[2])
end
local function earliest()
  local first = redis.call('ZRANGE', DUE, 0, 0, 'WITHSCORES')
  return first[2] and tonumber(first[2]) or -1
end
if redis.call('EXISTS', E) == 0 then return {'NONE', -1, elapsed(), {}, {}} end
local holder = redis.call('GET', LEASE)
if holder and holder ~= ARGV[2] then return {'LOST', earliest(), elapsed(), {}, {}} end
if redis.call('HGET', J, 'ver') ~= ARGV[7] then
  return {'STALE', earliest(), elapsed(), {}, {}}
end
local now = tonumber(t0[1]) * 1000 + math.floor(tonumber(t0[2]) / 1000)
redis.call('SET', LEASE, ARGV[2], 'PX', ARGV[3])
local period, grace, upto = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local next_due, at = string.format('%d', now + period), iso_ms(now)

local addrs, verdicts, leaves = {}, {}, {}
for i = 9, #ARGV - 2, 3 do
  addrs[#addrs + 1] = ARGV[i]
  verdicts[#addrs] = ARGV[i + 1]
  leaves[#addrs] = ARGV[i + 2]
end
local entries = call_many('HMGET', M, addrs, 2000)
local rm, seen, boards, gone = removal_new(E), {}, {}, {}
local again, passed, stray = {}, {}, {}
for i, a in ipairs(addrs) do
  local entry, due = entries[i], tonumber(redis.call('ZSCORE', DUE, a))
  if not due or due > upto then
    -- not due from this batch any more: nothing to do
  elseif not entry or string.sub(entry, -6) ~= ':rules' then
    stray[#stray + 1] = a
  else
    local v, lapse = verdicts[i], false
    if v == 'p' then
      passed[#passed + 1] = a
    elseif v == 'f' then
      local added = tonumber(string.sub(entry, 1, 16))
      if added and now - added < grace then
        lapse = true
      else
        local since = tonumber(redis.call('HGET', FAILING, a))
        if not since then
          redis.call('HSET', FAILING, a, string.format('%d', now))
        elseif now >= since + grace then
          lapse = true
        end
      end
    end
    if lapse and removal_take(rm, a, entry, seen, boards) then
      gone[#gone + 1] = a
      -- an address (0x and 40 hex digits) needs no escaping; leaves is the service's JSON
      emit(E, ARGV[1], 'member.lapsed', at, '', '{"address":"' .. a .. '","leaves":' ..
        (leaves[i] ~= '' and leaves[i] or '[]') .. '}')
    else
      again[#again + 1] = next_due
      again[#again + 1] = a
    end
  end
end
call_many('HDEL', FAILING, passed, 4000)
call_many('ZADD', DUE, again, 4000)
call_many('ZREM', DUE, stray, 4000)
call_many('HDEL', FAILING, stray, 4000)
removal_finish(rm, M, ORDER, ARGV[8])
return {'OK', earliest(), elapsed(), boards, gone}
