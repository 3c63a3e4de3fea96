-- webhook_update: changes a webhook endpoint's url, events, description or enabled (CONTRACT
-- section 14); who may, as webhook_create.lua. The stored JSON is decoded, changed and rendered
-- again by webhook_json, the one rendering every script shares.
-- KEYS: entity, owners, admins, webhooks (keys.h); a platform endpoint: webhooks:{platform}
-- ARGV: caller, platform, events_max, now (ISO), wid, the changes (a JSON object of the fields
--       given: url, events, description, enabled)
-- Enabling clears disabledReason, except for an endpoint disabled because its creator lost
-- the role and has not got it back: it stays disabled (CONFLICT_AT enabled), so that no one
-- revives an endpoint for someone who may no longer see the entity's events.
-- Returns the endpoint JSON; NOT_FOUND for no such endpoint.
local hooks, refused = webhook_hooks()
if not hooks then return refused end
local stored = redis.call('HGET', hooks, ARGV[5])
if not stored then return fail('NOT_FOUND', 'No such webhook endpoint.') end
local w = cjson.decode(stored)
local c = cjson.decode(ARGV[6])
if c.url ~= nil then w.url = c.url end
if c.events ~= nil then w.events = c.events end
if c.description ~= nil then w.description = c.description end
if c.enabled == true and w.enabled ~= true then
  if #KEYS > 1 and w.disabledReason == WEBHOOK_CREATOR_GONE and
      role_of(KEYS[2], KEYS[3], nil, w.createdBy) == '' then
    return fail('CONFLICT_AT', 'enabled The endpoint\'s creator is no longer an owner or ' ..
      'admin of the entity; make a new endpoint instead.')
  end
  w.enabled = true
  w.disabledReason = nil
elseif c.enabled == false then
  w.enabled = false
end
local json = webhook_json(w)
redis.call('HSET', hooks, ARGV[5], json)
return json
