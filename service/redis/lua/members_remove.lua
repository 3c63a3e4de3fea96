-- members_remove: takes members off an entity, for each of the removals of one entity that
-- arrived in one loop turn (a group, service/redis/group.h): they run one after the other, and
-- each gets the answer it would have had alone. A removal is owners and admins removing any
-- (mode 'remove'), or a signed caller leaving (mode 'leave', the one address being the caller's
-- own). Each is all or nothing; an address that is not a member (or was removed by a removal
-- before it in the group) counts as missing: removing twice is no error.
-- KEYS: the group's: entity, owners, admins, members, member order, XP board.
-- ARGV: the group's: events_max, now (ISO) (the removals of one loop turn share their time:
-- group_now_ms); the number of removals; then each removal's key count (0), argument count and
-- arguments: caller, platform, mode, a fresh random version, address... (lowercase,
-- deduplicated).
-- A removed member leaves the members hash and the order zset (so the users list) at once. Its
-- board entries are not taken off the big boards here: a ZREM at a random place of a board of a
-- million entries, one per board the member is on, was most of a removal's cost. Nor are they
-- tombstoned one by one: an insert into a board's ordered gone zset costs nearly as much, 11 of
-- them were more than half of a removal's Redis time (bench/RESULTS.md, 2026-11-27 22:48). Only
-- its XP entry is tombstoned, in the XP board's gone zset: progress ranks and the XP board's
-- counts subtract those. For its skill boards the member joins the entity's unswept set, one
-- O(1) write whatever its skills: skill board reads skip entries whose address is no member,
-- and the sweeper (jobs/sweeper.h, sweep_step.lua) takes the member's entries off later, from
-- its prog hash. An entry left so is always the entry of the member's progress as it is now
-- (contrib_revoke.lua keeps it so), so force_add.lua finds a re-added member's entries from its
-- prog hash, with no record of them. The service listed the entity in the sweeps set (keys.h)
-- before sending this. Its prog hash, contributions and reachedAt fields stay, so a force-add
-- lists it again with what it had.
-- A removed member who joined by rules is no longer re-checked (join:due, join:failing).
-- A removal that removes someone renews membersVersion (cached users pages hold only under the
-- version they were rendered from) and writes one event: member.removed {addresses (those
-- removed)}, or member.left {address}.
-- Answers one reply per removal: {removed, missing, board...} (the boards whose reads changed
-- beyond the entity hash and the unswept set: 'xp' when an XP entry was tombstoned), or its
-- error.
local KEYS, ARGV = KEYS, ARGV
local moving = moving_guard(KEYS[1])
if moving then return moving end
local E, maxlen, now_iso = KEYS[1], ARGV[1], ARGV[2]

-- Each caller's gate, asked once a group: a removal changes no role and no flag of the entity.
-- A signed caller may leave an enabled entity; a disabled one refuses owners and admins (403)
-- and is 404 to everyone else, as every write.
local gates = {}
local function gate(caller, platform, mode)
  local key = mode .. ' ' .. platform .. ' ' .. caller
  local g = gates[key]
  if g == nil then
    local role = role_of(KEYS[2], KEYS[3], nil, caller)
    g = write_gate(E, role, platform, mode == 'leave' and 'leave' or 'staff') or false
    gates[key] = g
  end
  return g or nil
end

-- Each key's writes are gathered over the group's members and sent once, at the end, sorted:
-- the inserts into a big zset then walk it near one another, in the CPU's caches. Nothing in
-- the group reads them back (taken stands in for the members hash).
local taken, gone_addrs, order, tombs, unswept = {}, {}, {}, {}, {}
local version
local replies = {}

-- A removed member's XP entry, tombstoned, and the member in the unswept set unless it has no
-- progress at all (then it is on no board); out lists the boards its removal changed.
local function tombstone(a, seen, out)
  local pk = prog_key(E, a)
  local v = tonumber(redis.call('HGET', pk, 'xp'))
  if v and v > 0 then
    tombs[#tombs + 1] = lb_member(v, a)
    if not seen.xp then
      seen.xp = true
      out[#out + 1] = 'xp'
    end
  elseif redis.call('EXISTS', pk) == 0 then
    return
  end
  unswept[#unswept + 1] = a
end

local at = 4
for c = 1, tonumber(ARGV[3]) do
  local first, n = at + 2, tonumber(ARGV[at + 1])
  at = first + n
  local caller, platform, mode = ARGV[first], ARGV[first + 1], ARGV[first + 2]
  local denied = gate(caller, platform, mode)
  if denied then
    replies[c] = denied
  else
    local addrs = {unpack(ARGV, first + 4, first + n - 1)}
    local entries = call_many('HMGET', KEYS[4], addrs, 2000)
    local removed, missing, list, out, seen = 0, 0, {}, {}, {}
    for i, a in ipairs(addrs) do
      local entry = entries[i]
      if entry and not taken[a] then
        taken[a] = true
        gone_addrs[#gone_addrs + 1] = a
        order[#order + 1] = entry
        tombstone(a, seen, out)
        removed = removed + 1
        -- an address (0x and 40 hex digits, checked by the service) needs no escaping
        list[removed] = '"' .. a .. '"'
      else
        missing = missing + 1
      end
    end
    if removed > 0 then
      version = ARGV[first + 3]
      if mode == 'leave' then
        emit(E, maxlen, 'member.left', now_iso, caller, '{"address":' .. list[1] .. '}')
      else
        emit(E, maxlen, 'member.removed', now_iso, caller, '{"addresses":[' ..
          table.concat(list, ',') .. ']}')
      end
    end
    table.insert(out, 1, missing)
    table.insert(out, 1, removed)
    replies[c] = out
  end
end

-- Score 0 before each member: the list ZADD takes, sorted first.
local function scored(members)
  table.sort(members)
  local args = {}
  for k, m in ipairs(members) do
    args[2 * k - 1] = '0'
    args[2 * k] = m
  end
  return args
end

if version then
  call_many('HDEL', KEYS[4], gone_addrs, 4000)
  table.sort(order)
  call_many('ZREM', KEYS[5], order, 4000)
  if #tombs > 0 then
    call_many('ZADD', gone_key(E, 'xp'), scored(tombs), 4000)
    redis.call('SADD', tombstoned_key(E), 'xp')
  end
  call_many('SADD', unswept_key(E), unswept, 4000)
  join_forget(E, gone_addrs)
  redis.call('HSET', E, 'membersVersion', version)
end
return replies
