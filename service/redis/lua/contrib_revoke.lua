-- contrib_revoke: revokes a contribution as an owner or admin: its XP and scores are taken back
-- (progress, and the boards while its member is a member, keys.h); a reachedAt it led to
-- stays. Revoking a revoked one
-- changes nothing. KEYS: entity, owners, admins, contribs
-- ARGV: caller, platform, contribution id, reason (validated), now (ms), now (ISO), events_max
-- (with the entity API key's id when one signed the request in: its event then names it)
-- Returns the Contribution JSON as stored after the call; in a skill tree, followed by a newline
-- and the ids of the skills above the revoked ones (space-separated), whose boards moved too
-- (CONTRACT section 15: a revocation takes its scores back from every total; board_add).
-- The owners and admins (KEYS[2], KEYS[3]) are read for the caller's role, never written:
-- keys-read-only: 2 3
local denied = write_open(nil, 'staff')
if denied then return denied end
local E, caller, cid, now_iso = KEYS[1], ARGV[1], ARGV[3], ARGV[6]
local json = redis.call('HGET', KEYS[4], cid)
if not json then return fail('NOT_FOUND', 'No such contribution.') end
local open = ',"revoked":false,"revokedAt":null,"revokedBy":null,"reason":null}'
if string.sub(json, -#open) ~= open then return json end
local c = cjson.decode(json)
-- A removed member's progress moves off the boards (a force-add lists it again with what it has
-- then); a deleted skill's score is left as it is, unread, and its board stays gone.
local unlisted = redis.call('HEXISTS', E .. ':members', c.member) == 0
if c.xp > 0 then prog_add(E, c.member, 'xp', 'xp', -c.xp, unlisted) end
local tree = #c.skills > 0 and board_tree_read(E) or nil
local ups, seen = {}, {}
for _, s in ipairs(c.skills) do
  if redis.call('HEXISTS', E .. ':skills', s.skillId) == 1 then
    if tree then
      for _, a in ipairs(board_add(E, c.member, s.skillId, string.format('%.0f', -s.score),
          unlisted, tree)) do
        if not seen[a] then
          seen[a] = true
          ups[#ups + 1] = a
        end
      end
    else
      prog_add(E, c.member, 's:' .. s.skillId, s.skillId, -s.score, unlisted)
    end
  end
end
json = string.sub(json, 1, #json - #open) .. ',"revoked":true,"revokedAt":' .. jstr(now_iso) ..
  ',"revokedBy":' .. jstr(caller) .. ',"reason":' .. jstr(ARGV[4]) .. '}'
redis.call('HSET', KEYS[4], cid, json)
emit(E, ARGV[7], 'contribution.revoked', now_iso, caller, '{"id":' .. jstr(cid) .. ',"member":' ..
  jstr(c.member) .. ',"reason":' .. jstr(ARGV[4]) .. '}')
if #ups > 0 then return json .. '\n' .. table.concat(ups, ' ') end
return json
