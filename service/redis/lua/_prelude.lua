-- Prepended to every script (service/lua/embed.py). Errors travel as error replies whose first
-- word is the HTTP meaning (NOT_FOUND, FORBIDDEN, CONFLICT, INVALID <field>); the service maps
-- them to the contract's envelope.
local function fail(code, message)
  return redis.error_reply(code .. ' ' .. message)
end

-- Every write script of an entity calls this first, before any other command. While its slot
-- is being moved to another Redis Cluster node, Redis 7.0 checks each command of a running
-- script on its own and stops the script, without undoing what it already wrote, at the first
-- key missing from this node (moved already, not declared, or emptied by the script itself).
-- A key that never exists answers that check the same way as one already moved, so this asks
-- about a key that never exists: an error means the slot is moving, and the script answers
-- TRYAGAIN with nothing written (the service retries it until the move ends). Outside a move,
-- and outside a cluster, it costs one EXISTS. keys.h: ent:{c-…}:probe.
local function moving_guard(entity)
  local r = redis.pcall('EXISTS', entity .. ':probe')
  if type(r) == 'table' and r.err then
    return fail('TRYAGAIN', 'The entity\'s slot is moving between Redis nodes; try again.')
  end
  return nil
end

-- The caller's role in an entity: 'owner', 'admin', 'member' or ''.
local function role_of(owners, admins, members, caller)
  if caller == '' then return '' end
  if redis.call('SISMEMBER', owners, caller) == 1 then return 'owner' end
  if redis.call('SISMEMBER', admins, caller) == 1 then return 'admin' end
  if members and redis.call('HEXISTS', members, caller) == 1 then return 'member' end
  return ''
end

-- Write gate shared by every write script. who: 'owners', 'staff' (owners and admins) or
-- 'leave' (a signed caller leaving: any role). Returns nil when the write may go on, else the
-- error reply to return.
-- A read for owners and admins (and platform admins: platform '1'): nil when the caller may,
-- else the refusal (no such entity for a stranger to a disabled one); what names the thing read.
local function staff_read(entity, role, platform, what)
  if redis.call('EXISTS', entity) == 0 then return fail('NOT_FOUND', 'No such entity.') end
  if platform == '1' then return nil end
  local enabled = redis.call('HGET', entity, 'isEnabled') ~= '0'
  if not enabled and role ~= 'owner' then return fail('NOT_FOUND', 'No such entity.') end
  if role ~= 'owner' and role ~= 'admin' then
    return fail('FORBIDDEN', 'Only the entity\'s owners and admins may see its ' .. what .. '.')
  end
end

local function write_gate(entity, role, platform, who)
  if redis.call('EXISTS', entity) == 0 then
    return fail('NOT_FOUND', 'No such entity.')
  end
  if platform == '1' then return nil end
  local enabled = redis.call('HGET', entity, 'isEnabled') ~= '0'
  local allowed = who == 'leave' or role == 'owner' or (who == 'staff' and role == 'admin')
  if not enabled then
    if role == 'owner' or role == 'admin' then
      return fail('FORBIDDEN', 'The entity is disabled.')
    end
    return fail('NOT_FOUND', 'No such entity.')
  end
  if not allowed then
    if who == 'owners' then
      return fail('FORBIDDEN', 'Only the entity\'s owners may do this.')
    end
    return fail('FORBIDDEN', 'Only the entity\'s owners and admins may do this.')
  end
  return nil
end

-- The opening of an entity's write script whose KEYS begin entity, owners, admins and whose
-- ARGV begin caller, platform: the moving guard before any other command, then the caller's
-- role (members: the members hash when a member's role counts, else nil) and the write gate
-- for who. Returns nil when the write may go on, else the error reply to return.
local function write_open(members, who)
  return moving_guard(KEYS[1]) or
    write_gate(KEYS[1], role_of(KEYS[2], KEYS[3], members, ARGV[1]), ARGV[2], who)
end

-- An add of the addresses ARGV[from], ARGV[from + 1]… to the entity's admins (a set) or members
-- (a hash: is_hash) that may hold at most `most` `what`: FULL when the addresses not in it yet
-- would take it past that (the add then writes nothing), else nil.
local function add_past_most(key, is_hash, from, most, what)
  local has, size = 'SISMEMBER', 'SCARD'
  if is_hash then has, size = 'HEXISTS', 'HLEN' end
  local fresh = 0
  for i = from, #ARGV do
    if redis.call(has, key, ARGV[i]) == 0 then fresh = fresh + 1 end
  end
  if fresh > 0 and redis.call(size, key) + fresh > tonumber(most) then
    return fail('FULL', 'addresses This entity may hold at most ' .. most .. ' ' .. what .. '.')
  end
  return nil
end

-- A JSON string literal. cjson escapes '/' as '\/'; undo that so stored JSON reads naturally
-- (safe: a literal backslash is always escaped as '\\' first).
local function jstr(v)
  return (string.gsub(cjson.encode(v or ''), '\\/', '/'))
end

-- A webhook endpoint as the API shows it (keys.h, ent:{c-…}:webhooks), from a table of its
-- fields (as cjson.decode gives the stored JSON back): one rendering, whichever script writes
-- it, so every script may decode, change a field and write it again.
local function webhook_json(w)
  local ev = {}
  for i, t in ipairs(w.events or {}) do ev[i] = jstr(t) end
  local why = w.disabledReason
  return '{"id":' .. jstr(w.id) .. ',"url":' .. jstr(w.url) .. ',"events":[' ..
    table.concat(ev, ',') .. '],"description":' .. jstr(w.description) .. ',"enabled":' ..
    ((w.enabled and w.enabled ~= cjson.null) and 'true' or 'false') .. ',"createdAt":' ..
    jstr(w.createdAt) .. ',"createdBy":' .. jstr(w.createdBy) .. ',"disabledReason":' ..
    ((why and why ~= cjson.null) and jstr(why) or 'null') .. '}'
end

-- The endpoints' hash a webhook script (webhook_create.lua's KEYS) works on, once its caller
-- passed the write gate: an entity's (KEYS[4]), or the platform's (the one key, its caller
-- found a platform admin already). Returns the hash, or nil and the refusal to return.
local function webhook_hooks()
  local moving = moving_guard(KEYS[1])
  if moving then return nil, moving end
  if #KEYS == 1 then return KEYS[1] end
  local denied = write_gate(KEYS[1], role_of(KEYS[2], KEYS[3], nil, ARGV[1]), ARGV[2], 'staff')
  if denied then return nil, denied end
  return KEYS[4]
end

-- Sets a hash's fields from a JSON object of field -> string, as the create and the update give
-- them. An empty object sets nothing (HSET wants at least one pair).
local function hset_json(key, json)
  local flat = {}
  for k, v in pairs(cjson.decode(json)) do
    flat[#flat + 1] = k
    flat[#flat + 1] = v
  end
  if #flat > 0 then redis.call('HSET', key, unpack(flat)) end
end

local ENTITY_TEXT = {'twitter', 'discord', 'website', 'telegram', 'instagram', 'openseaSlug',
  'imageURL', 'bannerURL', 'defaultDyNftThemeId', 'communityURLAlias'}

-- Renders the entity's API JSON from its hash and owners, stores it in the hash's 'json' field
-- (what reads return as is) and returns it.
local function render_entity(entity, owners)
  local h = redis.call('HGETALL', entity)
  local f = {}
  for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
  local list = redis.call('SMEMBERS', owners)
  table.sort(list)
  local own = {}
  for i, a in ipairs(list) do own[i] = '"' .. a .. '"' end
  local parts = {'{"id":', jstr(f.id), ',"name":', jstr(f.name), ',"description":',
    jstr(f.description), ',"ownerAddress":[', table.concat(own, ','), '],"contracts":',
    f.contracts or '[]'}
  for _, k in ipairs(ENTITY_TEXT) do
    parts[#parts + 1] = ',"' .. k .. '":' .. jstr(f[k])
  end
  parts[#parts + 1] = ',"public":' .. (f.public == '0' and 'false' or 'true')
  parts[#parts + 1] = ',"isEnabled":' .. (f.isEnabled == '0' and 'false' or 'true')
  parts[#parts + 1] = ',"createdAt":' .. jstr(f.createdAt) .. ',"modifiedAt":' ..
    jstr(f.modifiedAt) .. ',"__v":' .. (f.__v or '0') .. '}'
  local json = table.concat(parts)
  redis.call('HSET', entity, 'json', json)
  return json
end

-- Skill trees (CONTRACT section 15). A Skill JSON ends with "parentId" (null for a root) and
-- "depth" (a root is 0, at most SKILL_DEPTH_MAX); one of an earlier release has neither and
-- is a root. skill_json renders one from a table of its fields, as cjson.decode gives them.
local SKILL_DEPTH_MAX = 8

local function skill_parent(s)
  return type(s.parentId) == 'string' and s.parentId or nil
end

local function skill_json(s, parent, depth)
  return '{"id":' .. jstr(s.id) .. ',"entityID":' .. jstr(s.entityID) .. ',"name":' ..
    jstr(s.name) .. ',"description":' .. jstr(s.description) .. ',"createdAt":' ..
    jstr(s.createdAt) .. ',"createdBy":' .. jstr(s.createdBy) .. ',"parentId":' ..
    (parent and jstr(parent) or 'null') .. ',"depth":' .. string.format('%d', depth) .. '}'
end

-- An entity's skills parents before children: a pre-order walk from the roots, siblings in
-- the order set's order (creation order, batches in request order). Each is {text: its Skill
-- JSON as the API shows it (one of an earlier release rendered with parentId null and depth
-- 0), s: the decoded fields, parent: its parent's id or nil, kids: its children (nil for a
-- leaf, and for every skill of a flat list), score: its order score}; by_id maps an id to the
-- same table. A skill whose parent is missing is walked
-- as a root, so no stored skill ever drops out of the listing.
local function skills_preorder(skill_order)
  local flat = redis.call('ZRANGE', skill_order, 0, -1, 'WITHSCORES')
  local nodes, by_id, nested = {}, {}, false
  for i = 1, #flat, 2 do
    local s = cjson.decode(flat[i])
    local n = {text = flat[i], s = s, parent = skill_parent(s), score = flat[i + 1]}
    if s.depth == nil then n.text = skill_json(s, nil, 0) end
    nodes[#nodes + 1] = n
    by_id[s.id] = n
    nested = nested or n.parent ~= nil
  end
  -- a flat list (every entity of an earlier release) is its own walk
  if not nested then return nodes, by_id end
  local roots = {}
  for _, n in ipairs(nodes) do
    local p = n.parent and by_id[n.parent]
    if p then
      p.kids = p.kids or {}
      p.kids[#p.kids + 1] = n
    else
      roots[#roots + 1] = n
    end
  end
  local out, seen, stack = {}, {}, {}
  for i = #roots, 1, -1 do stack[#stack + 1] = roots[i] end
  while #stack > 0 do
    local n = stack[#stack]
    stack[#stack] = nil
    if not seen[n] then
      seen[n] = true
      out[#out + 1] = n
      for i = #(n.kids or {}), 1, -1 do stack[#stack + 1] = n.kids[i] end
    end
  end
  for _, n in ipairs(nodes) do
    if not seen[n] then out[#out + 1] = n end
  end
  return out, by_id
end

-- The progression template: what reading a member's progress and judging levels at award time
-- need of the skill tree, flat, so that neither decodes JSON on its hot path. One line per
-- skill in skill order (skills_preorder), "S<TAB><id><TAB><name as a JSON string><TAB><parent
-- id, empty for a root>", then one per level by XP then
-- id, "L<TAB><id><TAB><XP><TAB><endsAt ISO, or empty><TAB><name as a JSON string><TAB><skill id>
-- <score> <skill id> <score>...", and, for a level that requires others, "<TAB><k> <k>...":
-- the places of the required levels among the L lines (0 the first), so that judging a level
-- finds its prerequisites' lines without a search (a template is always rendered whole). A
-- level without requires has no such column: its line is what it was before requires existed.
-- A template where some level has the column ends with the line "R", so that a parser finds
-- out from its last two bytes whether to look for the column at all (looking costs a scan of
-- each level's skill column).
-- Numbers pass through a double: XP and scores are at most 2^53 - 1 (the service checks),
-- which a double holds exactly.
-- gen_key (optional): the entity's levels:gen hash (keys.h), level id -> how many times a level
-- of that id was deleted. A level of generation g > 0 is written "<id>:<g>" in the id column:
-- its reachedAt field is "r:" .. that column, so the fields an earlier level of the same id
-- left in members' prog hashes are never read again (ids hold no ':'; the API's level id is the
-- column up to its first ':').
-- A template where some skill has a parent begins with the line "T" (a tree): the readers
-- that roll scores up into totals (tpl_tree, resources/progress_totals.c) find out from its
-- first two bytes whether to cut the S lines at all; a flat list's total is its own score.
-- skills (optional): skills_preorder(skill_order), when the caller has it already.
local function progtpl_build(skill_order, level_order, gen_key, skills)
  local lines, gens = {}, {}
  if gen_key then
    local flat = redis.call('HGETALL', gen_key)
    for i = 1, #flat, 2 do gens[flat[i]] = flat[i + 1] end
  end
  local nested = false
  for _, n in ipairs(skills or skills_preorder(skill_order)) do
    lines[#lines + 1] = 'S\t' .. n.s.id .. '\t' .. jstr(n.s.name) .. '\t' .. (n.parent or '')
    nested = nested or n.parent ~= nil
  end
  if nested then table.insert(lines, 1, 'T') end
  local levels, place, requiring = {}, {}, false
  for i, text in ipairs(redis.call('ZRANGE', level_order, 0, -1)) do
    local l = cjson.decode(text)
    levels[i], place[l.id] = l, i - 1
  end
  for _, l in ipairs(levels) do
    local need = {}
    for i, sid in ipairs(l.skillIds) do
      need[#need + 1] = sid .. ' ' .. string.format('%.0f', tonumber(l.scores[i]) or 0)
    end
    local col = l.id
    if gens[l.id] and gens[l.id] ~= '0' then col = l.id .. ':' .. gens[l.id] end
    lines[#lines + 1] = 'L\t' .. col .. '\t' .. string.format('%.0f', l.XP) .. '\t' ..
      (type(l.endsAt) == 'string' and l.endsAt or '') .. '\t' .. jstr(l.name) .. '\t' ..
      table.concat(need, ' ')
    if type(l.requires) == 'table' and #l.requires > 0 then
      local at = {}
      -- a required level always exists (level_upsert.lua, level_delete.lua)
      for _, r in ipairs(l.requires) do
        if place[r] then at[#at + 1] = tostring(place[r]) end
      end
      if #at > 0 then
        lines[#lines] = lines[#lines] .. '\t' .. table.concat(at, ' ')
        requiring = true
      end
    end
  end
  if requiring then lines[#lines + 1] = 'R' end
  return table.concat(lines, '\n')
end

-- A tree template (progtpl_build) for tpl_totals: nil for a flat one (no line "T"), where
-- every total is the skill's own score. Skills' parents are looked up as needed and kept
-- (up: id -> parent id, '' for a root, false when not in the tree), so a call judging many
-- members finds each line once.
local function tpl_tree(tpl)
  if string.sub(tpl, 1, 2) ~= 'T\n' then return nil end
  return {tpl = tpl, up = {}, whole = false}
end

-- The parent of skill id in a tree (tpl_tree): its id, '' for a root, false when the skill is
-- not in the tree (deleted). One plain search for its S line, "S<TAB>id<TAB>name<TAB>parent"
-- (a name is a JSON string: no raw tab).
local function tpl_parent(tree, id)
  local p = tree.up[id]
  if p == nil and not tree.whole then
    local tpl = tree.tpl
    local at = string.find(tpl, '\nS\t' .. id .. '\t', 1, true)
    p = false
    if at then
      local t = string.find(tpl, '\t', at + #id + 4, true)
      local eol = string.find(tpl, '\n', at + 1, true) or #tpl + 1
      if t and t < eol then p = string.sub(tpl, t + 1, eol - 1) end
    end
    tree.up[id] = p
  end
  return p or false
end

-- A member's totals in a tree (tpl_tree) from its prog hash's fields as a table (field ->
-- value): each own "s:<id>" score added to its skill and to every skill above it, so a
-- skill's total is its own score plus its children's totals. A score of a skill no longer in
-- the tree (deleted) counts nowhere; the walk up is bounded (depth is at most 8). A member
-- with many scored skills has the whole tree cut at once (one gmatch) rather than a search
-- each.
local TPL_SEARCHES_MAX = 32
local function tpl_totals(tree, have)
  local scored = {}
  for f in pairs(have) do
    if string.sub(f, 1, 2) == 's:' then scored[#scored + 1] = f end
  end
  if #scored > TPL_SEARCHES_MAX and not tree.whole then
    local up = {}
    for id, parent in string.gmatch(tree.tpl, '\nS\t([^\t\n]*)\t[^\t\n]*\t([^\t\n]*)') do
      up[id] = parent
    end
    tree.up, tree.whole = up, true
  end
  local totals = {}
  for _, f in ipairs(scored) do
    local id, score = string.sub(f, 3), tonumber(have[f]) or 0
    local p = score ~= 0 and tpl_parent(tree, id)
    for _ = 1, 16 do
      if not p then break end
      totals[id] = (totals[id] or 0) + score
      if p == '' then break end
      id, p = p, tpl_parent(tree, p)
    end
  end
  return totals
end

-- Renders the skill tree fragment '"skills":[…],"levels":[…]' from the order sets (Skill and
-- Level JSONs in API order) into the entity hash's 'skilltree' field, what reads return as is,
-- and the progression template beside it ('progtpl').
-- A Level JSON saved before levels could require others is shown with "requires":[] (a
-- quoted key never occurs inside a JSON string, whose quotes are escaped).
local function level_with_requires(text)
  if string.find(text, '"requires":', 1, true) then return text end
  local at = string.find(text, ',"endsAt":', 1, true)
  if not at then return text end
  return string.sub(text, 1, at - 1) .. ',"requires":[]' .. string.sub(text, at)
end

local function render_skilltree(entity, skill_order, level_order)
  local skills, texts = skills_preorder(skill_order), {}
  for i, n in ipairs(skills) do texts[i] = n.text end
  local levels = redis.call('ZRANGE', level_order, 0, -1)
  for i, text in ipairs(levels) do levels[i] = level_with_requires(text) end
  local frag = '"skills":[' .. table.concat(texts, ',') ..
    '],"levels":[' .. table.concat(levels, ',') .. ']'
  local nested = false
  for _, n in ipairs(skills) do nested = nested or n.parent ~= nil end
  redis.call('HSET', entity, 'skilltree', frag, 'progtpl',
    progtpl_build(skill_order, level_order, entity .. ':levels:gen', skills), 'nested',
    nested and '1' or '0')
end

-- The skill tree's budget (SKILLTREE_MAX_BYTES): a write that adds `growth` bytes to the
-- stored tree (the 'skilltree' field, render_skilltree) may go on when it does not grow it, or
-- when the tree stays within `budget` bytes. A tree already over the budget (the setting
-- lowered) takes every write that does not grow it: shortening, deleting.
-- skilltree_size: the stored tree's bytes (a tree not rendered yet: its frame);
-- skilltree_fits: true when the write may go on.
local function skilltree_size(entity)
  local size = redis.call('HSTRLEN', entity, 'skilltree')
  if size == 0 then size = #'"skills":[],"levels":[]' end
  return size
end

local function skilltree_fits(entity, growth, budget, size)
  if growth <= 0 then return true end
  return (size or skilltree_size(entity)) + growth <= (tonumber(budget) or 0)
end

local function skilltree_refusal(budget)
  return 'would take the entity\'s skill tree past SKILLTREE_MAX_BYTES (' .. budget ..
    ' bytes).'
end

local function sorted_members(set)
  local list = redis.call('SMEMBERS', set)
  table.sort(list)
  return list
end

-- Events (keys.h: <entity>:events). Every write script records its change here in the same
-- script, so a change and its event are never apart. The scripts' events_max argument is
-- "<EVENTS_MAX>:<EVENTS_MAX_BYTES>[:<apiKeyId>]" (a bare count from an earlier release: no byte
-- budget); events_limits splits it once a call: {count as given, budget in bytes (0: none),
-- the id of the entity API key that signed the request in, or nil}.
local events_limits_of = {}
local function events_limits(arg)
  local l = events_limits_of[arg]
  if not l then
    local n, b, k = string.match(arg, '^(%d+):(%d+):?(%x*)$')
    l = {n or arg, tonumber(b) or 0, (k ~= nil and k ~= '') and k or nil}
    events_limits_of[arg] = l
  end
  return l
end

-- What an event adds to the entity's running byte count: its values and a fixed share for its
-- id and the stream's own structure (about what Redis 7.0 stores per entry beyond them).
local function event_bytes(etype, at, actor, data)
  return #etype + #at + #(actor or '') + #data + 40
end

-- The byte budget (EVENTS_MAX_BYTES): `added` bytes of events were just written. The entity
-- hash's eventBytes counts every event's bytes ever written (it only grows), so it needs no
-- correction when a count trim (MAXLEN ~) or a byte trim drops events. Each time it passes a
-- multiple of budget/16, the stream's real size is measured (MEMORY USAGE, every node: about
-- 0.5 ms at 64 MiB) and, when over the budget, the oldest entries go: the share of the count
-- that brings it to 15/16 of the budget, in whole nodes (XTRIM ~, whose default LIMIT bounds
-- the work of one call). When that limit stops the trim short, the counter is set just below
-- the next multiple, so the next event measures again. Between measurements the stream may
-- pass the budget by at most budget/16 of event bytes and one call's events.
local function events_budget(entity, limits, added)
  local budget = limits[2]
  if budget <= 0 or added <= 0 then return end
  local step = math.max(1, math.floor(budget / 16))
  local after = redis.call('HINCRBY', entity, 'eventBytes', added)
  if math.floor(after / step) == math.floor((after - added) / step) then return end
  local key = entity .. ':events'
  -- refused (an ACL, a managed Redis without it): the write goes on, without a byte trim
  local used = redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', '0')
  if type(used) ~= 'number' or used <= budget then return end
  local len = redis.call('XLEN', key)
  local keep = math.max(1, math.floor(len * (budget - step) / used))
  local gone = redis.call('XTRIM', key, 'MAXLEN', '~', keep)
  if len - gone > keep + 128 then
    redis.call('HSET', entity, 'eventBytes', (math.floor(after / step) + 1) * step - 1)
  end
end

-- limits: the events_max argument as the script got it (events_limits).
local function emit(entity, limits, etype, at, actor, data)
  local l = events_limits(limits)
  if l[3] and string.sub(data, -1) == '}' then -- a key's request: the event says which key
    data = string.sub(data, 1, -2) .. (#data > 2 and ',' or '') .. '"apiKeyId":"' .. l[3] .. '"}'
  end
  redis.call('XADD', entity .. ':events', 'MAXLEN', '~', l[1], '*', 'type', etype, 'at', at,
    'actor', actor or '', 'data', data)
  events_budget(entity, l, event_bytes(etype, at, actor, data))
end

-- An endpoint belongs to someone who still may see the entity's events (CONTRACT section 14):
-- the scripts that take an owner's or an admin's role away call this with the address, and once
-- it holds neither role, every enabled endpoint it made in the entity's webhooks hash (keys.h)
-- is disabled, each with a webhook.disabled event {webhookId, reason}.
local WEBHOOK_CREATOR_GONE = 'creator is no longer an owner or admin'
local function webhooks_creator_gone(entity, owners, admins, hooks, limits, at, actor, creator)
  if redis.call('SISMEMBER', owners, creator) == 1 or
      redis.call('SISMEMBER', admins, creator) == 1 then
    return
  end
  local flat = redis.call('HGETALL', hooks)
  for i = 1, #flat, 2 do
    if string.sub(flat[i], 1, 4) ~= 'sec:' then
      local w = cjson.decode(flat[i + 1])
      if w.createdBy == creator and w.enabled == true then
        w.enabled = false
        w.disabledReason = WEBHOOK_CREATOR_GONE
        redis.call('HSET', hooks, flat[i], webhook_json(w))
        emit(entity, limits, 'webhook.disabled', at, actor, '{"webhookId":' .. jstr(flat[i]) ..
          ',"reason":' .. jstr(WEBHOOK_CREATOR_GONE) .. '}')
      end
    end
  end
end

-- Member progression (keys.h). A leaderboard member is "<16 digits: 9999999999999999 - value>:
-- <address>", all scores 0, so ZRANGEBYLEX ascending is the highest value first, ties by
-- address. 9999999999999999 is past 2^53, so the complement is taken in two halves of 8 digits,
-- each exact in a double (value at most 2^53 - 1).
-- Remembered for the call: an award formats the same few values again and again (a score of 1
-- before and after), and string.format was a sizeable share of an award's Lua.
local lb_inv_of = {}
local function lb_inv(value)
  local s = lb_inv_of[value]
  if s then return s end
  local hi = math.floor(value / 100000000)
  local lo = value - hi * 100000000
  s = string.format('%08d%08d', 99999999 - hi, 99999999 - lo)
  lb_inv_of[value] = s
  return s
end

local function lb_member(value, addr)
  return lb_inv(value) .. ':' .. addr
end

-- by: 'xp' or a skill id.
local function lb_key(entity, by)
  if by == 'xp' then return entity .. ':lb:xp' end
  return entity .. ':lb:s:' .. by
end

local function prog_key(entity, addr)
  return entity .. ':prog:' .. addr
end

-- The removed members whose skill boards' entries may still wait for the sweeper (keys.h).
local function unswept_key(entity)
  return entity .. ':lb:unswept'
end

-- Adds delta to one progress field ('xp' or 's:<skill id>') of a member and moves the member's
-- entry in that leaderboard (only values above 0 are listed). Returns the new value. delta is
-- best given as a string: Redis 7.0 turns a number argument into text with snprintf.
-- unlisted: the address is not listed (a removed member, whose progress stays): its progress
-- moves, and its entry at the value before, if still on the board waiting for the sweeper
-- (tombstoned on the XP board), goes, with its tombstone. So a removed member's entries still
-- on the boards are always the entries of its progress as it is (keys.h), and a force-add
-- takes them back from its prog hash alone (member_boards) and lists it again with what it
-- has then.
local function prog_add(entity, addr, field, by, delta, unlisted)
  local pk = prog_key(entity, addr)
  local after = redis.call('HINCRBY', pk, field, delta)
  local before = after - delta
  local lb = lb_key(entity, by)
  if unlisted then
    if before > 0 then
      local e = lb_member(before, addr)
      redis.call('ZREM', lb .. ':gone', e)
      redis.call('ZREM', lb, e)
    end
    return after
  end
  if before > 0 then redis.call('ZREM', lb, lb_member(before, addr)) end
  if after > 0 then redis.call('ZADD', lb, '0', lb_member(after, addr)) end
  return after
end

-- Boards by total (CONTRACT section 15; keys.h: prog hash "t:<skill id>"). A skill's board
-- ranks members by their total: own score plus the totals of its children. The prog hash
-- holds "t:<skill id>", the total that skill's board lists the member at, once some skill
-- below it has given the member a score; without that field the board lists the own score
-- ("s:<skill id>"), so a flat entity (every skill a root) never writes or reads one. Awards
-- and revocations move "t:" and the board entry together (contrib_award.lua, board_add), so a
-- board's entry of a member is always at board_value of the prog hash as stored, which is what
-- removals, the sweeper and force-add find it by.
-- board_tree(tpl): the skill tree as the progression template's S lines give it
-- (progtpl_build): {parent = id -> parent id, known = id -> true}, or nil when no skill has a
-- parent (one search of the S lines: a root's line ends with its tab, a child's with its
-- parent's id), so that a flat entity parses nothing. rebuilding: the entity's boards are
-- being rebuilt (the entity hash's lbRebuild): then a flat tree is a tree too, as members may
-- still hold "t:" fields of the tree before, which every write must move the boards by.
local function board_tree(tpl, rebuilding)
  if not tpl then tpl = '' end
  -- a tree's template begins with the line "T" (progtpl_build): the S lines follow it
  if string.sub(tpl, 1, 2) == 'T\n' then tpl = string.sub(tpl, 3) end
  local stop = string.find(tpl, '\nL\t', 1, true)
  if string.sub(tpl, 1, 2) ~= 'S\t' then stop = 0 end
  local sec = stop and string.sub(tpl, 1, stop) or (tpl .. '\n')
  if not rebuilding and (stop == 0 or not string.find(sec, '[^\t]\n')) then return nil end
  local parent, known = {}, {}
  -- a name is a JSON string: its tabs are escaped, so the fields split at raw tabs
  for id, up in string.gmatch(sec, 'S\t([^\t\n]+)\t[^\t\n]*\t([^\t\n]*)\n') do
    known[id] = true
    if up ~= '' then parent[id] = up end
  end
  return {parent = parent, known = known}
end

-- The tree of an entity's writes other than the award (which reads the template itself):
-- whether it is one ("nested", render_skilltree) and whether a rebuild is under way in one
-- small read, then its template only when it is a tree or rebuilding.
local function board_tree_read(entity)
  local got = redis.call('HMGET', entity, 'nested', 'lbRebuild')
  if got[1] ~= '1' and not got[2] then return nil end -- flat: the template is not read
  return board_tree(redis.call('HGET', entity, 'progtpl') or nil, got[2] and true or false)
end

-- A move or a deletion changed the totals of the skills `ids` (keys.h: lb:rebuild): their
-- boards are rebuilt from the members' own scores, by the sweeper's steps (sweep_step.lua),
-- from the start of the members again if a rebuild was under way; until the last step their
-- reads answer "rebuilding":true, and every write moves boards by the stored "t:" fields.
local function board_rebuild_start(entity, ids)
  if #ids == 0 then return end
  redis.call('SADD', entity .. ':lb:rebuild:boards', unpack(ids))
  redis.call('HSET', entity .. ':lb:rebuild', 'cursor', '0')
  redis.call('HSET', entity, 'lbRebuild', '1')
end

-- The ancestors of a skill, nearest first (at most SKILL_DEPTH_MAX of them; the bound also
-- ends a walk through a cycle, which the skill scripts never let in).
local function board_ancestors(tree, sid)
  local up, out = tree and tree.parent[sid], {}
  while up and #out < 8 do
    out[#out + 1] = up
    up = tree.parent[up]
  end
  return out
end

-- What skill sid's board lists a member at, from its prog hash's fields as a table.
local function board_value(h, sid)
  return tonumber(h['t:' .. sid] or h['s:' .. sid] or '0') or 0
end

-- Moves a member's entry on a board from the value before to the value after (only values
-- above 0 are listed); unlisted (a removed member): its entry at the value before, if still
-- waiting for the sweeper, goes with its tombstone, and none is added.
local function board_move(entity, addr, by, before, after, unlisted)
  if before == after then return end
  local lb = lb_key(entity, by)
  if before > 0 then
    local e = lb_member(before, addr)
    if unlisted then redis.call('ZREM', lb .. ':gone', e) end
    redis.call('ZREM', lb, e)
  end
  if after > 0 and not unlisted then redis.call('ZADD', lb, '0', lb_member(after, addr)) end
end

-- Adds delta to a member's own score in skill sid and to the total of sid and of every
-- ancestor, each board moved with it (prog_add for a tree: contrib_revoke.lua); returns the
-- ancestors, whose boards changed too.
local function board_add(entity, addr, sid, delta, unlisted, tree)
  local ups = board_ancestors(tree, sid)
  local pk = prog_key(entity, addr)
  local names = {'s:' .. sid, 't:' .. sid}
  for _, a in ipairs(ups) do
    names[#names + 1] = 's:' .. a
    names[#names + 1] = 't:' .. a
  end
  local got = redis.call('HMGET', pk, unpack(names))
  local h = {}
  for i, f in ipairs(names) do h[f] = got[i] or nil end
  local before = board_value(h, sid)
  local own = redis.call('HINCRBY', pk, 's:' .. sid, delta)
  local sets = {}
  local d = tonumber(delta)
  if h['t:' .. sid] then
    sets[#sets + 1], sets[#sets + 2] = 't:' .. sid, string.format('%.0f', before + d)
    board_move(entity, addr, sid, before, before + d, unlisted)
  else
    board_move(entity, addr, sid, own - d, own, unlisted)
  end
  for _, a in ipairs(ups) do
    local b = board_value(h, a)
    sets[#sets + 1], sets[#sets + 2] = 't:' .. a, string.format('%.0f', b + d)
    board_move(entity, addr, a, b, b + d, unlisted)
  end
  if #sets > 0 then redis.call('HSET', pk, unpack(sets)) end
  return ups
end

-- A member's totals as the current tree makes them, from its own scores alone (a skill no
-- longer in the tree counts nowhere): id -> total, and has_below: id -> true for the skills
-- some scored skill lies under (those keep a "t:" field).
local function board_totals(h, tree)
  local total, below = {}, {}
  for f, v in pairs(h) do
    if string.sub(f, 1, 2) == 's:' then
      local sid = string.sub(f, 3)
      if tree.known[sid] then
        local n = tonumber(v) or 0
        total[sid] = (total[sid] or 0) + n
        for _, a in ipairs(board_ancestors(tree, sid)) do
          total[a] = (total[a] or 0) + n
          below[a] = true
        end
      end
    end
  end
  return total, below
end

-- Sets a member's "t:" fields and board entries to its exact totals in the given skills (a
-- set; nil: all of them) as the current tree makes them (tree: board_tree, never nil), each
-- entry moved from where the stored fields put it. mode: nil (a member), 'unlisted' (a removed
-- member: entries only taken off), 'relist' (a member added again: each entry taken off, with
-- any tombstone, and put back, as a swept one is gone already). h: its prog hash's fields
-- (nil: read here). moves (with mode nil): a table the board moves are gathered in instead,
-- skill id -> {rem = entries, add = entries}, for board_moves_apply: a rebuild's step moves
-- many members on the same few boards, and one sorted ZREM and ZADD per board walk each
-- skiplist in order at one command's cost, where a command per entry costs about twice as
-- much (bench/RESULTS.md). Returns the skills whose boards changed.
local function board_exact(entity, addr, tree, only, mode, h, moves)
  local pk = prog_key(entity, addr)
  if not h then
    h = {}
    local flat = redis.call('HGETALL', pk)
    for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  end
  local total, below = board_totals(h, tree)
  local sets, dels, changed = {}, {}, {}
  for sid in pairs(only or tree.known) do
    if tree.known[sid] then
      local before, after = board_value(h, sid), total[sid] or 0
      if below[sid] then
        if tonumber(h['t:' .. sid]) ~= after then
          sets[#sets + 1], sets[#sets + 2] = 't:' .. sid, string.format('%.0f', after)
        end
      elseif h['t:' .. sid] then
        dels[#dels + 1] = 't:' .. sid
      end
      if mode == 'relist' then
        if before > 0 then
          local lb, e = lb_key(entity, sid), lb_member(before, addr)
          redis.call('ZREM', lb .. ':gone', e)
          redis.call('ZREM', lb, e)
        end
        if after > 0 then redis.call('ZADD', lb_key(entity, sid), '0', lb_member(after, addr)) end
        if before > 0 or after > 0 then changed[#changed + 1] = sid end
      elseif before ~= after then
        if moves then
          local m = moves[sid]
          if not m then
            m = {rem = {}, add = {}}
            moves[sid] = m
          end
          if before > 0 then m.rem[#m.rem + 1] = lb_member(before, addr) end
          if after > 0 then m.add[#m.add + 1] = lb_member(after, addr) end
        else
          board_move(entity, addr, sid, before, after, mode == 'unlisted')
        end
        changed[#changed + 1] = sid
      end
    end
  end
  if #sets > 0 then redis.call('HSET', pk, unpack(sets)) end
  if #dels > 0 then redis.call('HDEL', pk, unpack(dels)) end
  return changed
end

-- Puts a member added again back on every board its progress lists it on, from its prog hash
-- alone: two commands per field of that member's, none over the entity's members. An entry
-- still on its board, tombstoned (its removal not swept yet), only loses its tombstone: a
-- removed member's tombstones are the entries of its progress as it is (prog_add). A skill no
-- longer in the entity's skills hash has no board: its stored score stays unread. In a tree
-- (tree_of: a function giving board_tree of the template, called only for a member with
-- progress), the skill boards get the member's exact totals as the tree stands now
-- (board_exact), whatever a move since its removal left in its "t:" fields; so too in a tree
-- made flat since, when its hash still holds one (tree_of(true): the tree even if flat).
-- Returns the boards changed, as 'xp' or skill ids (the service drops them from its read
-- cache).
local function member_boards(entity, addr, tree_of)
  local flat = redis.call('HGETALL', prog_key(entity, addr))
  local changed = {}
  local tree = #flat > 0 and tree_of and tree_of() or nil
  if not tree and tree_of then
    for i = 1, #flat, 2 do
      if string.sub(flat[i], 1, 2) == 't:' then
        tree = tree_of(true)
        break
      end
    end
  end
  -- its entries are live again: nothing is left for the sweeper to take off
  if #flat > 0 then redis.call('SREM', unswept_key(entity), addr) end
  local h = tree and {} or nil
  for i = 1, #flat, 2 do
    local f, v = flat[i], tonumber(flat[i + 1]) or 0
    local by
    if h then h[f] = flat[i + 1] end
    if f == 'xp' then
      by = 'xp'
    elseif not tree and string.sub(f, 1, 2) == 's:' then
      by = string.sub(f, 3)
      if redis.call('HEXISTS', entity .. ':skills', by) == 0 then by = nil end
    end
    if by and v > 0 then
      local lb, e = lb_key(entity, by), lb_member(v, addr)
      redis.call('ZREM', lb .. ':gone', e)
      redis.call('ZADD', lb, '0', e)
      changed[#changed + 1] = by
    end
  end
  if tree and #flat > 0 then
    for _, sid in ipairs(board_exact(entity, addr, tree, nil, 'relist', h)) do
      changed[#changed + 1] = sid
    end
  end
  return changed
end

-- A skill name's normalized form, as the service computes it for skills:names: the stored name
-- is trimmed already; ASCII letters folded to lower case, nothing else.
local function norm_name(name)
  return (string.gsub(name, '[A-Z]', function(c) return string.char(string.byte(c) + 32) end))
end

-- Runs cmd on key with the arguments in list, in pieces of at most `step` (unpack's stack
-- limit; even, for lists of pairs); returns the replies joined (for HMGET).
local function call_many(cmd, key, list, step)
  if #list == 0 then return {} end
  if #list <= step then return redis.call(cmd, key, unpack(list)) end
  local out = {}
  for from = 1, #list, step do
    local r = redis.call(cmd, key, unpack(list, from, math.min(#list, from + step - 1)))
    if type(r) == 'table' then
      for i = 1, #r do out[#out + 1] = r[i] end
    end
  end
  return out
end

-- Applies the board moves board_exact gathered: per board, its removals and then its
-- additions, each sorted (every entry is a distinct member's, so none is both).
local function board_moves_apply(entity, moves)
  for sid, m in pairs(moves) do
    local lb = lb_key(entity, sid)
    table.sort(m.rem)
    call_many('ZREM', lb, m.rem, 4000)
    table.sort(m.add)
    local args = {}
    for i, e in ipairs(m.add) do
      args[2 * i - 1], args[2 * i] = '0', e
    end
    call_many('ZADD', lb, args, 4000)
  end
end

-- Removal tombstones (keys.h: lb:…:gone, lb:unswept, sweep). A removed member's board entries
-- stay on the boards until the sweeper takes them off (sweep_step.lua); until then its XP
-- entry is also in the XP board's gone zset, which every count subtracts, and the member is in
-- the unswept set; skill board reads skip entries whose address is no member. Earlier
-- versions' removals tombstoned skill board entries in their boards' gone zsets too, and
-- before that also wrote a sweep record per member, "<address> <by>=<16 digits> <by>=<16
-- digits>…" (the entry is "<16 digits>:<address>"): the sweeper goes board by board, so a
-- record may list entries already swept (a ZREM of nothing); the records go together once no
-- tombstone is left.
local function gone_key(entity, by)
  return lb_key(entity, by) .. ':gone'
end

-- The set of the boards ('xp' or skill ids) whose gone zset may hold tombstones (keys.h).
local function tombstoned_key(entity)
  return entity .. ':lb:tombstoned'
end

-- The sweep record of an address, or nil: the sweep zset's entries all score 0, so the record
-- is the one lex range that begins with the address and a space. Only removals by an earlier
-- version wrote records (an instance of it may, during a rolling upgrade); their tombstones
-- are the entries at removal, which a revocation since may have left behind.
local function sweep_record(entity, addr)
  return redis.call('ZRANGEBYLEX', entity .. ':sweep', '[' .. addr .. ' ', '(' .. addr .. '!',
    'LIMIT', 0, 1)[1]
end

-- Webhook deliveries (keys.h, ent:{c-…}:wh:<wid>…). Times are Redis's clock (TIME), the one
-- clock every instance's leases and due times agree on.
local function redis_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- ISO 8601 UTC with milliseconds of Unix ms (days to a civil date: the proleptic Gregorian
-- calendar's 400-year era arithmetic).
local function iso_ms(ms)
  local s = math.floor(ms / 1000)
  local days, rem = math.floor(s / 86400), s % 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) -
    math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d, math.floor(rem / 3600),
    math.floor(rem % 3600 / 60), rem % 60, ms % 1000)
end

-- Unix ms of an ISO 8601 UTC text as iso_ms writes it (0 when it is not one).
local function ms_of_iso(t)
  local y, mo, d, h, mi, s, ms = string.match(t or '',
    '^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.?(%d*)Z$')
  if not y then return 0 end
  y, mo = tonumber(y), tonumber(mo)
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (mo + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + tonumber(d) - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe - 719468
  return ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60000 + tonumber(s) * 1000 +
    (tonumber(ms ~= '' and ms or '0') or 0)
end

local function jval(v)
  if v == nil or v == cjson.null then return 'null' end
  if type(v) == 'number' then return string.format('%.0f', v) end
  return jstr(v)
end

-- A delivery as the API shows it (CONTRACT section 14), from a table of its fields.
local function delivery_json(d)
  return '{"id":' .. jstr(d.id) .. ',"eventId":' .. jstr(d.eventId) .. ',"type":' ..
    jval(d.type) .. ',"attempts":' .. string.format('%d', tonumber(d.attempts) or 0) ..
    ',"status":' .. jstr(d.status) .. ',"lastAttemptAt":' .. jval(d.lastAttemptAt) ..
    ',"nextAttemptAt":' .. jval(d.nextAttemptAt) .. ',"responseStatus":' ..
    jval(d.responseStatus) .. ',"responseBody":' .. jval(d.responseBody) .. ',"reason":' ..
    jval(d.reason) .. '}'
end

-- Writes a delivery record into the endpoint's log (wh: its state key) and keeps the log's
-- byte count there; what it adds counts against the entity's event byte budget too (limits:
-- the events_max argument, events_budget), so a busy log makes room by trimming events.
local function delivery_put(entity, wh, d, limits)
  local json = delivery_json(d)
  local old = redis.call('HSTRLEN', wh .. ':log', d.id)
  local grew = #json + (old == 0 and #d.id + 24 or 0) - old
  redis.call('HSET', wh .. ':log', d.id, json)
  redis.call('HINCRBY', wh, 'bytes', grew)
  if grew > 0 then events_budget(entity, events_limits(limits), grew) end
  return json
end

-- Takes a delivery out of the log (a trim), with its bytes.
local function delivery_drop(wh, id)
  local size = redis.call('HSTRLEN', wh .. ':log', id)
  if size > 0 then
    redis.call('HDEL', wh .. ':log', id)
    redis.call('HINCRBY', wh, 'bytes', -(size + #id + 24))
  end
  redis.call('ZREM', wh .. ':order', id)
end

-- Disables an endpoint (reason: "gone", "failing"), once, with its webhook.disabled event;
-- true when it did.
local function webhook_disable(entity, hooks, wid, reason, limits, now)
  local raw = redis.call('HGET', hooks, wid)
  if not raw then return false end
  local w = cjson.decode(raw)
  if not w.enabled or w.enabled == cjson.null then return false end
  w.enabled = false
  w.disabledReason = reason
  redis.call('HSET', hooks, wid, webhook_json(w))
  emit(entity, limits, 'webhook.disabled', iso_ms(now), '',
    '{"webhookId":' .. jstr(wid) .. ',"reason":' .. jstr(reason) .. '}')
  return true
end

-- A member added again (force_add.lua, join_add.lua) comes back on the boards with the XP and
-- scores it kept, its entries still waiting for the sweeper taken back (member_boards). A
-- removal by an earlier version left a sweep record instead: its tombstones go with it, and an
-- entry its progress no longer holds (a revocation since) goes too. Adds the boards it went back
-- on to out, each once (seen).
local function member_back(entity, a, tree_of, seen, out)
  local rec = sweep_record(entity, a)
  if rec then
    local pk = prog_key(entity, a)
    for by, inv in string.gmatch(rec, ' ([^ =]+)=(%d+)') do
      local e = inv .. ':' .. a
      redis.call('ZREM', gone_key(entity, by), e)
      local v
      if by == 'xp' then
        v = tonumber(redis.call('HGET', pk, 'xp')) or 0
      else -- its total once a skill below gave it one (board_value)
        local got = redis.call('HMGET', pk, 't:' .. by, 's:' .. by)
        v = tonumber(got[1] or got[2] or '0') or 0
      end
      if v <= 0 or lb_inv(v) ~= inv then redis.call('ZREM', lb_key(entity, by), e) end
    end
    redis.call('ZREM', entity .. ':sweep', rec)
  end
  for _, by in ipairs(member_boards(entity, a, tree_of)) do
    if not seen[by] then
      seen[by] = true
      out[#out + 1] = by
    end
  end
end

-- A rules member (CONTRACT section 16) is re-checked from its entity's join:due zset and
-- join:failing hash (keys.h); a removal, or a force-add making it a manual member, takes it off
-- both.
local function join_forget(entity, addrs)
  local due, failing = entity .. ':join:due', entity .. ':join:failing'
  -- most entities have no rules members: one EXISTS, no writes
  if #addrs == 0 or redis.call('EXISTS', due, failing) == 0 then return end
  call_many('ZREM', due, addrs, 4000)
  call_many('HDEL', failing, addrs, 4000)
end

-- The skill tree of an entity for member_boards, read once and only for a member added again
-- with progress (board_tree).
local function tree_reader(entity)
  local tree, read
  return function(even_flat)
    if not read then
      read = true
      tree = board_tree_read(entity)
    end
    if not tree and even_flat then
      return board_tree(redis.call('HGET', entity, 'progtpl'), true)
    end
    return tree
  end
end

-- Section 8's removal of members, shared by every script that takes members off an entity
-- (members_remove.lua: owners, admins and leaving callers; join_verdicts.lua: the re-check of
-- join rules). A removed member leaves the members hash and the order zset (so the users list)
-- at once. Its board entries are not taken off the big boards here: a ZREM at a random place of
-- a board of a million entries, one per board the member is on, was most of a removal's cost.
-- Nor are they tombstoned one by one: an insert into a board's ordered gone zset costs nearly
-- as much, 11 of them were more than half of a removal's Redis time (bench/RESULTS.md,
-- 2026-11-27 22:48). Only its XP entry is tombstoned, in the XP board's gone zset: progress
-- ranks and the XP board's counts subtract those. For its skill boards the member joins the
-- entity's unswept set, one O(1) write whatever its skills: skill board reads skip entries
-- whose address is no member, and the sweeper (jobs/sweeper.h, sweep_step.lua) takes the
-- member's entries off later, from its prog hash. An entry left so is always the entry of the
-- member's progress as it is now (contrib_revoke.lua keeps it so), so force_add.lua finds a
-- re-added member's entries from its prog hash, with no record of them. The service lists the
-- entity in the sweeps set (keys.h) before sending such a script. Its prog hash, contributions
-- and reachedAt fields stay, so a force-add lists it again with what it had. A removed member
-- is no longer re-checked by the entity's join rule (keys.h: join:due, join:failing).
-- Each key's writes are gathered over the removal's members and sent once, by removal_finish,
-- sorted: the inserts into a big zset then walk it near one another, in the CPU's caches.
-- Nothing in between reads them back (taken stands in for the members hash).
local function removal_new(entity)
  return {E = entity, taken = {}, addrs = {}, order = {}, tombs = {}, unswept = {}}
end

-- Takes member a (its entry as the members hash holds it) off: false when it is no member or
-- this removal took it already. out lists the boards whose reads changed beyond the entity
-- hash and the unswept set ('xp' when its XP entry was tombstoned), seen the ones listed.
local function removal_take(rm, a, entry, seen, out)
  if not entry or rm.taken[a] then return false end
  rm.taken[a] = true
  rm.addrs[#rm.addrs + 1] = a
  rm.order[#rm.order + 1] = entry
  local pk = prog_key(rm.E, a)
  local v = tonumber(redis.call('HGET', pk, 'xp'))
  if v and v > 0 then
    rm.tombs[#rm.tombs + 1] = lb_member(v, a)
    if not seen.xp then
      seen.xp = true
      out[#out + 1] = 'xp'
    end
  elseif redis.call('EXISTS', pk) == 0 then
    return true -- no progress at all: on no board
  end
  rm.unswept[#rm.unswept + 1] = a
  return true
end

-- Writes what the removal took: members hash, order zset, tombstones, unswept set, the join
-- rule's re-check, and a fresh membersVersion (cached users pages hold only under the version
-- they were rendered from). Nothing when it took no one.
local function removal_finish(rm, members, order, version)
  if #rm.addrs == 0 then return end
  local E = rm.E
  call_many('HDEL', members, rm.addrs, 4000)
  table.sort(rm.order)
  call_many('ZREM', order, rm.order, 4000)
  if #rm.tombs > 0 then
    -- score 0 before each entry, sorted first
    table.sort(rm.tombs)
    local args = {}
    for k, m in ipairs(rm.tombs) do
      args[2 * k - 1] = '0'
      args[2 * k] = m
    end
    call_many('ZADD', gone_key(E, 'xp'), args, 4000)
    redis.call('SADD', tombstoned_key(E), 'xp')
  end
  call_many('SADD', unswept_key(E), rm.unswept, 4000)
  join_forget(E, rm.addrs)
  redis.call('HSET', E, 'membersVersion', version)
end
