-- wh_take: the next deliveries of an endpoint whose lease the caller holds: first those due
-- (retries, and attempts a dead instance started), then the events after the cursor that the
-- endpoint subscribes to, each given its delivery record (pending) and due entry while the
-- cursor moves past it, in one step, so that no event is skipped or made twice. Each delivery
-- taken is due again at now + hold (the attempt's deadline plus the lease): an attempt whose
-- instance dies is tried again. Trims the log (WEBHOOK_LOG_MAX, 7 days; pending ones stay).
-- KEYS: entity, webhooks, wh, events
-- keys-read-only: 2 4
-- (events: a take only reads it, but for a byte trim of delivery_put that Redis's own
-- invalidation reports; dropped here at each answer, the watch of the entity (push/watch.h)
-- would wake the endpoint for a take again, and again, without end)
-- ARGV: wid, token, entity id, n (deliveries wanted), hold ms, log max, events_max, scan; for a
--       platform endpoint also its JSON and secrets, read by the service from its own slot
--       (webhooks:{platform}), whose lease (whp:{<wid>}) the service holds: no lease here
-- Returns {'OK', url, secrets, oldest pending's made ms ('0': none), {delivery id, attempts, XRANGE entry}…}, or {'LOST'} (the
-- lease is not the caller's), {'OFF'} (disabled), {'PAUSED', ms left}, {'GONE'}, {'MISSING'}.
local g = moving_guard(KEYS[1])
if g then return g end
local wid, eid = ARGV[1], ARGV[3]
local n, hold, logmax, limits = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local wh, events = KEYS[3], KEYS[4]
if redis.call('EXISTS', KEYS[1]) == 0 then return {'GONE'} end
local platform = ARGV[9] ~= nil
local raw = platform and ARGV[9] or redis.call('HGET', KEYS[2], wid)
if not raw then return {'MISSING'} end
local st = redis.call('HMGET', wh, 'lease', 'leaseUntil', 'cursor', 'pausedUntil', 'cursorN')
local now = redis_now_ms()
if not platform and (st[1] ~= ARGV[2] or (tonumber(st[2]) or 0) <= now) then return {'LOST'} end
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
local out = {'OK', w.url, platform and ARGV[10] or redis.call('HGET', KEYS[2], 'sec:' .. wid) or '',
  '0'}
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
    local e = {}
    if string.match(evid, '^%d+%-%d+$') then e = redis.call('XRANGE', events, evid, evid) end
    if #e == 0 then
      failed_trimmed(id, evid, cjson.decode(rec).type)
    else
      redis.call('ZADD', wh .. ':due', due_at, id)
      out[#out + 1] = {id, cjson.decode(rec).attempts or 0, e[1]}
    end
  end
end

-- Then what happened since the cursor (absent: the endpoint's creation). cursorN is the
-- cursor's ordinal among every event ever added to the stream (XINFO entries-added), known
-- once the endpoint has caught up with the stream's end: a trim removes the oldest entries, so
-- more removed than cursorN means events after the cursor went before they were taken.
local cursor, cursor_n = st[3], tonumber(st[5])
local counts
local function stream_counts()
  if not counts then
    counts = {added = 0, len = 0}
    local info = redis.pcall('XINFO', 'STREAM', events)
    if type(info) == 'table' and not info.err then
      for i = 1, #info, 2 do
        if info[i] == 'entries-added' then counts.added = tonumber(info[i + 1]) or 0 end
        if info[i] == 'length' then counts.len = tonumber(info[i + 1]) or 0 end
      end
    end
  end
  return counts
end
local from
if cursor then
  from = '(' .. cursor
  local first = redis.call('XRANGE', events, '-', '+', 'COUNT', 1)[1]
  if cursor_n and first and first[1] ~= cursor then
    local c = stream_counts()
    local gone = c.added - c.len
    if gone > cursor_n then
      -- One failed record names the gap: its events are gone, and with them their types.
      local id = eid .. ':' .. cursor .. ':trimmed'
      redis.call('ZADD', wh .. ':order', now, id)
      delivery_put(KEYS[1], wh, {id = id, eventId = cjson.null, type = cjson.null,
        attempts = 0, status = 'failed', reason = 'trimmed'}, limits)
      cursor_n = gone
      redis.call('HSET', wh, 'cursorN', string.format('%.0f', gone))
    end
  end
else
  from = string.format('%.0f', ms_of_iso(w.createdAt)) .. '-0'
end
local took = #out - 4
if took < n then
  local last, scanned, broke = nil, 0, false
  local scan = tonumber(ARGV[8])
  local list = redis.call('XRANGE', events, from, '+', 'COUNT', scan)
  for _, e in ipairs(list) do
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
    scanned = scanned + 1
    if took >= n then
      broke = scanned < #list or #list == scan
      break
    end
  end
  if cursor_n then
    cursor_n = cursor_n + scanned
  elseif not broke and #list < scan then
    -- caught up: the last entry read (or the cursor) is the stream's newest
    cursor_n = stream_counts().added
  end
  if last then redis.call('HSET', wh, 'cursor', last) end
  if cursor_n then redis.call('HSET', wh, 'cursorN', string.format('%.0f', cursor_n)) end
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
