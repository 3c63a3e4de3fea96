-- wh_result: what one delivery attempt came to. Success: succeeded, and the endpoint's
-- failing time ends. Failure: the attempt is counted with its status, reason and answer (1 KiB
-- of it), and the delivery is due again after delay ms (and any Retry-After pause), or failed
-- when the schedule is over; an endpoint answering 410, or failing with no success for the
-- disable time, is disabled (webhook.disabled). A delivery no longer pending (another
-- instance's attempt of it came first) or trimmed away is left as it is.
-- KEYS: entity, webhooks, wh, events (emit)
-- ARGV: wid, delivery id, outcome ('ok'|'fail'|'gone'), HTTP status ('' none), answer body,
--       reason, delay ms (-1: no attempt left), pause ms, disable after ms, events_max
-- Returns 'DONE', 'DISABLED' (done, and the endpoint disabled by it), 'STALE' or 'GONE'.
local g = moving_guard(KEYS[1])
if g then return g end
if redis.call('EXISTS', KEYS[1]) == 0 then return 'GONE' end
local wid, id, outcome, wh = ARGV[1], ARGV[2], ARGV[3], KEYS[3]
local rec = redis.call('HGET', wh .. ':log', id)
if not rec then return 'STALE' end
local d = cjson.decode(rec)
if d.status ~= 'pending' then return 'STALE' end
local now = redis_now_ms()
d.attempts = (tonumber(d.attempts) or 0) + 1
d.lastAttemptAt = iso_ms(now)
d.responseStatus = tonumber(ARGV[4]) or cjson.null
if outcome == 'ok' then
  d.status, d.nextAttemptAt, d.responseBody, d.reason = 'succeeded', cjson.null, cjson.null,
    cjson.null
  redis.call('ZREM', wh .. ':due', id)
  redis.call('HDEL', wh, 'failingSince')
  delivery_put(KEYS[1], wh, d, ARGV[10])
  return 'DONE'
end
d.responseBody = ARGV[5] ~= '' and ARGV[5] or cjson.null
d.reason = ARGV[6]
local delay, pause = tonumber(ARGV[7]), tonumber(ARGV[8])
if pause > 0 then
  local untl = now + pause
  if untl > (tonumber(redis.call('HGET', wh, 'pausedUntil')) or 0) then
    redis.call('HSET', wh, 'pausedUntil', string.format('%.0f', untl))
  end
end
if delay >= 0 then
  local at = now + math.max(delay, pause)
  d.nextAttemptAt = iso_ms(at)
  redis.call('ZADD', wh .. ':due', string.format('%.0f', at), id)
else
  d.status, d.nextAttemptAt = 'failed', cjson.null
  redis.call('ZREM', wh .. ':due', id)
end
delivery_put(KEYS[1], wh, d, ARGV[10])
local since = tonumber(redis.call('HGET', wh, 'failingSince'))
if not since then
  since = now
  redis.call('HSET', wh, 'failingSince', string.format('%.0f', now))
end
local reason
if outcome == 'gone' then
  reason = 'gone'
elseif now - since >= tonumber(ARGV[9]) then
  reason = 'failing'
end
if reason then
  -- failing time restarts when it is enabled again
  redis.call('HDEL', wh, 'failingSince')
  if webhook_disable(KEYS[1], KEYS[2], wid, reason, ARGV[10], now) then return 'DISABLED' end
end
return 'DONE'
