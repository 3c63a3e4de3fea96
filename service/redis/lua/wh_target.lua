-- wh_target: where a test send of POST …/webhooks/{wid}/test goes, for the entity's owners and
-- admins: the endpoint's JSON and its secrets. Writes nothing; a refused caller costs the role
-- lookups alone (CONTRACT section 12).
-- KEYS: entity, owners, admins, webhooks   ARGV: caller, platform, wid
-- Returns {endpoint JSON, sec:<wid> field}.
-- A test send is an outbound call: gated as the entity's writes are (a disabled entity's
-- owners and admins are refused too), before anything of the endpoint is read.
local refused = write_open(nil, 'staff')
if refused then return refused end
local w = redis.call('HGET', KEYS[4], ARGV[3])
if not w then return fail('NOT_FOUND', 'No such webhook.') end
return {w, redis.call('HGET', KEYS[4], 'sec:' .. ARGV[3]) or ''}
