-- wh_take: the next deliveries of an endpoint whose lease the caller holds: first those due
-- (retries, and attempts a dead instance started), then the events after the cursor that the
-- endpoint subscribes to, each given its delivery record (pending) and due entry while the
-- cursor moves past it, in one step, so that no event is skipped or made twice. Each delivery
-- taken is due again at now + hold (the attempt's deadline plus the lease): an attempt whose
-- instance dies is tried again. Trims the log (WEBHOOK_LOG_MAX, 7 days; pending ones stay).
-- KEYS: entity, webhooks, wh, events
-- ARGV: wid, token, entity id, n (deliveries wanted), hold ms, log max, events_max, scan
-- Returns {'OK', url, secrets, oldest pending's made ms ('0': none), {delivery id, attempts, XRANGE entry}…}, or {'LOST'} (the
-- lease is not the caller's), {'OFF'} (disabled), {'PAUSED', ms left}, {'GONE'}, {'MISSING'}.
local g = moving_guard(KEYS[1])
if g then return g end
local wid, eid = ARGV[1], ARGV[3]
local n, hold, logmax, limits = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local wh, events = KEYS[3], KEYS[4]
if redis.call('EXISTS', KEYS[1]) == 0 then return {'GONE'} end
local raw = redis.call('HGET', KEYS[2], wid)
if not raw then return {'MISSING'} end
local st = redis.call('HMGET', wh, 'lease', 'leaseUntil', 'cursor', 'pausedUntil')
local now = redis_now_ms()
if st[1] ~= ARGV[2] or (tonumber(st[2]) or 0) <= now then return {'LOST'} end
local w = cjson.decode(raw)
if not w.enabled or w.enabled == cjson.null then return {'OFF'} end
local paused = tonumber(st[4]) or 0
if paused > now then return {'PAUSED', paused - now} end
local want = {}
local all = true
for _, t in ipairs(w.events or {}) do
  want[t] = true
  all = false
end
local out = {'OK', w.url, redis.call('HGET', KEYS[2], 'sec:' .. wid) or '', '0'}
local due_at = string.format('%.0f', now + hold)

local function failed_trimmed(id, evid, etype)
  local d = {id = id, eventId = evid, type = etype, attempts = 0, status = 'failed',
    reason = 'trimmed'}
  local rec = redis.call('HGET', wh .. ':log', id)
  if rec then
    d = cjson.decode(rec)
    d.status, d.reason, d.nextAttemptAt = 'failed', 'trimmed', cjson.null
  else
    redis.call('ZADD', wh .. ':order', now, id)
  end
  delivery_put(KEYS[1], wh, d, limits)
  redis.call('ZREM', wh .. ':due', id)
end

-- Due first: retries and lapsed attempts, oldest due first.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', wh .. ':due', '-inf', now, 'LIMIT', 0, n)) do
  local rec = redis.call('HGET', wh .. ':log', id)
  local evid = string.sub(id, #eid + 2)
  if not rec then
    redis.call('ZREM', wh .. ':due', id)
  else
    local e = redis.call('XRANGE', events, evid, evid)
    if #e == 0 then
      failed_trimmed(id, evid, cjson.decode(rec).type)
    else
      redis.call('ZADD', wh .. ':due', due_at, id)
      out[#out + 1] = {id, cjson.decode(rec).attempts or 0, e[1]}
    end
  end
end

-- Then what happened since the cursor (absent: the endpoint's creation).
local cursor = st[3]
local from
if cursor then
  from = '(' .. cursor
  -- Events trimmed before they were taken (the endpoint disabled, or far behind): one failed
  -- record names the last of them.
  local first = redis.call('XRANGE', events, '-', '+', 'COUNT', 1)[1]
  if first then
    local cm, cs = string.match(cursor, '^(%d+)-(%d+)$')
    local fm, fs = string.match(first[1], '^(%d+)-(%d+)$')
    if cm and fm and (tonumber(fm) > tonumber(cm) or
        (fm == cm and tonumber(fs) > tonumber(cs) + 1)) then
      local info = redis.pcall('XINFO', 'STREAM', events)
      local gone
      if type(info) == 'table' and not info.err then
        for i = 1, #info, 2 do
          if info[i] == 'max-deleted-entry-id' then gone = info[i + 1] end
        end
      end
      local gm, gs = string.match(gone or '', '^(%d+)-(%d+)$')
      if gm and (tonumber(gm) > tonumber(cm) or (gm == cm and tonumber(gs) > tonumber(cs))) then
        failed_trimmed(eid .. ':' .. gone, gone, cjson.null)
        redis.call('HSET', wh, 'cursor', gone)
      end
    end
  end
else
  from = string.format('%.0f', ms_of_iso(w.createdAt)) .. '-0'
end
local took = #out - 4
if took < n then
  local last
  for _, e in ipairs(redis.call('XRANGE', events, from, '+', 'COUNT', tonumber(ARGV[8]))) do
    local etype
    for i = 1, #e[2], 2 do
      if e[2][i] == 'type' then etype = e[2][i + 1] end
    end
    if all or want[etype] then
      local id = eid .. ':' .. e[1]
      delivery_put(KEYS[1], wh, {id = id, eventId = e[1], type = etype, attempts = 0,
        status = 'pending', nextAttemptAt = iso_ms(now)}, limits)
      redis.call('ZADD', wh .. ':order', now, id)
      redis.call('ZADD', wh .. ':due', due_at, id)
      out[#out + 1] = {id, 0, e}
      took = took + 1
    end
    last = e[1]
    if took >= n then break end
  end
  if last then redis.call('HSET', wh, 'cursor', last) end
end

-- The log's bounds: the oldest beyond logmax, and those older than 7 days; pending stay.
local order = wh .. ':order'
local excess = redis.call('ZCARD', order) - logmax
local old = redis.call('ZRANGEBYSCORE', order, '-inf', now - 7 * 86400000, 'LIMIT', 0, 64)
if excess > 0 then
  for _, id in ipairs(redis.call('ZRANGE', order, 0, math.min(excess, 64) - 1)) do
    old[#old + 1] = id
  end
end
for _, id in ipairs(old) do
  if not redis.call('ZSCORE', wh .. ':due', id) then delivery_drop(wh, id) end
end
-- For the metrics: when the oldest of the ten pending deliveries due soonest was made.
local oldest
for _, id in ipairs(redis.call('ZRANGE', wh .. ':due', 0, 9)) do
  local made = tonumber(redis.call('ZSCORE', order, id))
  if made and (not oldest or made < oldest) then oldest = made end
end
out[4] = string.format('%.0f', oldest or 0)
return out
