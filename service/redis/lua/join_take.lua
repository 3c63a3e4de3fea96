-- join_take: the next batch of an entity's re-check of its join rule (CONTRACT section 16,
-- "Staying true"; jobs/joinsweep.h): up to ARGV[3] rules members whose check is due (keys.h:
-- join:due, score <= Redis's now), under the entity's re-check lease (keys.h: join:lease,
-- Redis's clock): one instance at a time checks an entity. The lease is taken or renewed here,
-- at each batch; an instance meeting another's lease in force leaves the entity to it, and a
-- dead instance's lease runs out, so that the next take of any instance goes on. A take with
-- nothing due leaves the lease as it is: the entity stays with the instance that checked it
-- last while that one lives, rather than passing between instances at each due. Nothing is
-- marked taken: a batch whose verdicts never land (a crash, a chain that never answered) is
-- still due, and taken again once the lease is free.
-- KEYS: entity, join rule hash, join:due, join:lease
-- ARGV: this instance's lease token, the lease's ms, the most members of a batch, the period's
-- ms (JOIN_RECHECK_SECONDS)
-- Returns {'NONE'} (no such entity, or no rule: nothing is re-checked), {'HELD', the lease's
-- ms left}, {'IDLE', the earliest due ms or -1 when none}, or
-- {'BATCH', Redis's now ms, the rule JSON, its author, its ver, the script's µs, the latest due
-- taken (ms), address...}.
local E, J, DUE, LEASE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local moving = moving_guard(E)
if moving then return moving end
local t0 = redis.call('TIME')
if redis.call('EXISTS', E) == 0 then return {'NONE'} end
local rule = redis.call('HMGET', J, 'rule', 'updatedBy', 'ver')
if not rule[1] then return {'NONE'} end
local holder = redis.call('GET', LEASE)
if holder and holder ~= ARGV[1] then return {'HELD', redis.call('PTTL', LEASE)} end
local now = tonumber(t0[1]) * 1000 + math.floor(tonumber(t0[2]) / 1000)
-- Members due a little ahead come along: as many as come due in the time a full batch takes to
-- come due, were the entity's dues spread evenly over the period (at most half of it), so a
-- period takes about one batch per ARGV[3] members, not one per member woken alone.
-- A batch is taken only once its earliest member is due: a take as soon as the last one ended
-- would bring along only the members come due ahead in between (bench-join: 795 eth_calls for
-- 100,000 members, 126 a call), where waiting for the earliest brings a window's worth.
local most, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local first = redis.call('ZRANGE', DUE, 0, 0, 'WITHSCORES')
if not first[2] or tonumber(first[2]) > now then
  return {'IDLE', first[2] and tonumber(first[2]) or -1}
end
local ahead = math.floor(period * most / math.max(redis.call('ZCARD', DUE), most))
ahead = math.min(ahead, math.floor(period / 2))
local upto = now + ahead
local due = redis.call('ZRANGEBYSCORE', DUE, '-inf', upto, 'LIMIT', 0, most)
redis.call('SET', LEASE, ARGV[1], 'PX', ARGV[2])
local t1 = redis.call('TIME')
local us = (tonumber(t1[1]) - tonumber(t0[1])) * 1000000 + tonumber(t1[2]) - tonumber(t0[2])
return {'BATCH', now, rule[1], rule[2] or '', rule[3] or '0', us, upto, unpack(due)}
