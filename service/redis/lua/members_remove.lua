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
-- What a removal writes is _prelude.lua's (removal_new, removal_take, removal_finish): the
-- member list at once, its board entries left for the sweeper (the service listed the entity
-- in the sweeps set, keys.h, before sending this), its join rule's re-check ended.
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

local rm = removal_new(E)
local version
local replies = {}

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
      if removal_take(rm, a, entries[i], seen, out) then
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

if version then removal_finish(rm, KEYS[4], KEYS[5], version) end
return replies
