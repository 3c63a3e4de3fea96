-- leaderboard: one page of an entity's board (GET …/leaderboard), in one round trip.
-- KEYS: entity, owners, admins, members, skills
-- ARGV: caller, by ('xp' or a skill id), cursor ('' for the first page, else the board entry
--       the previous page ended with), limit, platform ('1'|'0')
-- A board (keys.h: ent:{…}:lb:xp, ent:{…}:lb:s:<skill id>) holds "<9999999999999999 - value,
-- 16 digits>:<address>" at score 0, so ZRANGEBYLEX runs from the highest value, ties by
-- address; a page is O(log N + limit). Returns {isEnabled, public, role} alone when the caller
-- cannot read the entity (the service answers the refusal), else {isEnabled, public, role,
-- address, value, rank, ..., next cursor or ''}: competition ranks (1, 2, 2, 4). An unknown
-- skill is 'INVALID by', told only to a caller who may read the entity.
if redis.call('EXISTS', KEYS[1]) == 0 then return fail('NOT_FOUND', 'No such entity.') end
local f = redis.call('HMGET', KEYS[1], 'isEnabled', 'public')
local role = role_of(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
local out = {f[1] or '', f[2] or '', role}
local enabled, public = f[1] ~= '0', f[2] ~= '0'
if not (ARGV[5] == '1' or role == 'owner' or (enabled and (public or role ~= ''))) then
  return out
end
local board
if ARGV[2] == 'xp' then
  board = KEYS[1] .. ':lb:xp'
elseif redis.call('HEXISTS', KEYS[5], ARGV[2]) == 1 then
  board = KEYS[1] .. ':lb:s:' .. ARGV[2]
else
  return fail('INVALID by', 'by must be xp or the id of one of the entity\'s skills.')
end
local limit = tonumber(ARGV[4])
local start = ARGV[3] == '' and '-' or '(' .. ARGV[3]
local page = redis.call('ZRANGEBYLEX', board, start, '+', 'LIMIT', 0, limit + 1)
if #page == 0 then
  out[#out + 1] = ''
  return out
end
local NINES = {['0'] = '9', ['1'] = '8', ['2'] = '7', ['3'] = '6', ['4'] = '5', ['5'] = '4',
  ['6'] = '3', ['7'] = '2', ['8'] = '1', ['9'] = '0'}
-- Entries before the page, and the rank of its first value (ties may begin on an earlier page).
local before = redis.call('ZLEXCOUNT', board, '-', '(' .. page[1])
local prev_inv, prev_rank = string.sub(page[1], 1, 16), nil
prev_rank = 1 + redis.call('ZLEXCOUNT', board, '-', '(' .. prev_inv .. ':')
local n = math.min(limit, #page)
for i = 1, n do
  local e = page[i]
  local inv = string.sub(e, 1, 16)
  local rank = prev_rank
  if inv ~= prev_inv then rank = before + i end
  local value = string.gsub(string.gsub(inv, '%d', NINES), '^0+', '')
  out[#out + 1] = string.sub(e, 18)
  out[#out + 1] = value == '' and '0' or value
  out[#out + 1] = rank
  prev_inv, prev_rank = inv, rank
end
out[#out + 1] = #page > limit and page[limit] or ''
return out
