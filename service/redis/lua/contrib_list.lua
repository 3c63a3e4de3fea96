-- contrib_list: one page of a member's contributions, newest first (GET …/contributions).
-- KEYS: entity, owners, admins, members, contribs
-- ARGV: caller, member address, cursor ('' for the first page, else the entry the previous page
--       ended with), limit, platform ('1'|'0')
-- ent:{…}:contribs:of:<address> (keys.h) holds "<createdAt ms, 16 digits>:<contribution id>"
-- at score 0, so ZREVRANGEBYLEX runs newest first: O(log N + limit). Returns {isEnabled, public,
-- role} alone when the caller can read neither the entity nor as the member themself (the
-- service answers the refusal), else {isEnabled, public, role, the member known ('1'|'0': a
-- member, or contributions or progress recorded),
-- Contribution JSON, ..., next cursor or ''}.
if redis.call('EXISTS', KEYS[1]) == 0 then return fail('NOT_FOUND', 'No such entity.') end
local f = redis.call('HMGET', KEYS[1], 'isEnabled', 'public')
local role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
local out = {f[1] or '', f[2] or '', role}
local enabled, public = f[1] ~= '0', f[2] ~= '0'
if not (ARGV[5] == '1' or role == 'owner' or
    (enabled and (public or role ~= '' or ARGV[1] == ARGV[2]))) then
  return out
end
local list = KEYS[1] .. ':contribs:of:' .. ARGV[2]
local known = redis.call('EXISTS', list) == 1 or redis.call('HEXISTS', KEYS[4], ARGV[2]) == 1
  or redis.call('EXISTS', KEYS[1] .. ':prog:' .. ARGV[2]) == 1
out[#out + 1] = known and '1' or '0'
local limit = tonumber(ARGV[4])
local start = ARGV[3] == '' and '+' or '(' .. ARGV[3]
local page = redis.call('ZREVRANGEBYLEX', list, start, '-', 'LIMIT', 0, limit + 1)
local n = math.min(limit, #page)
if n > 0 then
  local ids = {}
  for i = 1, n do ids[i] = string.sub(page[i], 18) end
  local got = redis.call('HMGET', KEYS[5], unpack(ids))
  for i = 1, n do
    if got[i] then out[#out + 1] = got[i] end
  end
end
out[#out + 1] = #page > limit and page[limit] or ''
return out
