#!lua
-- finish: acknowledges a batch of reserved jobs of one bucket; each is gone.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2..] 2 per job, 1..1000 jobs: id, receipt ("" skips the check; else
--          11 bytes: seq (7) and delivery number (4), big-endian, decoded
--          from the receipt's hex digits by the caller)
-- Reply    one status per job, in order: "ok" | "not_found" | "not_reserved
--          <state>" (no receipt and the job is in that state, not reserved) | "stale_receipt" (a
--          receipt that is not the job's current reservation's, also when
--          the job is no longer reserved)
-- Errors   invalid_argument for a malformed batch (nothing changed). An id
--          no job can have (not 1-256 bytes without control characters) is
--          simply not_found, as in the engine.
--
-- A reservation whose deadline <= now_ms has run out: it is timed out first
-- (as the engine acts on the time before every call), so its receipt is
-- stale. Counter: finished.
--!include lib.lua

local function main()
  read_now()
  local n = (#ARGV - 1) / 2
  if n < 1 or n > MAX_BATCH or n ~= math.floor(n) then
    abort('invalid_argument', 'jobs: expected 1..' .. MAX_BATCH .. ' pairs of id, receipt')
  end
  local ids, receipts = {}, {}
  for k = 1, n do
    ids[k] = ARGV[2 * k]
    receipts[k] = ARGV[2 * k + 1]
  end
  local vals = redis.call('HMGET', K_JOBS, unpack(ids))
  -- Each job's TTR deadline is read only when some reservation of the bucket
  -- has run out; otherwise every reserved job's reservation is running.
  local deadlines
  local first = redis.call('ZRANGE', K_RESERVED, 0, 0, 'WITHSCORES')
  if first[2] and tonumber(first[2]) <= NOW then
    deadlines = redis.call('ZMSCORE', K_RESERVED, unpack(ids))
  end
  -- Deliveries given back, read only when some job of the bucket has any.
  local givens
  if has_given() then givens = redis.call('HMGET', K_GIVEN, unpack(ids)) end
  -- Job k's delivery number, its record's fields given.
  local function delivery_at(k, seq, attempts)
    return delivery_number(attempts, givens and given_in(givens[k], seq) or 0)
  end
  -- Whether job k's reservation has run out (only asked of a reserved job).
  local function ran_out(k)
    if deadlines == nil then return false end
    local d = tonumber(deadlines[k])
    return d ~= nil and d <= NOW
  end

  -- met[id]: SEEN once an item of this batch has read the job, GONE once one
  -- has finished it (one table: a job finished at once is one entry).
  local SEEN, GONE = 1, 2
  local out, met = {}, {}
  local gone_ids = {}  -- for HDEL and ZREM alike
  local per_topic, topic_order = {}, {}
  local function finished(k, id, topic)
    out[k] = 'ok'
    met[id] = GONE
    gone_ids[#gone_ids + 1] = id
    tally(per_topic, topic_order, topic)
  end
  for k = 1, n do
    local id = ids[k]
    local v = vals[k]
    -- The common case first, without decoding the record: a job reserved
    -- once in this batch, its reservation running, its receipt right.
    local state, attempts, seq, topic, _
    local seen = met[id]
    if v and not seen then
      state, attempts, _, _, _, _, seq, topic = struct.unpack(HEAD_TOPIC, v)
    end
    if state == RESERVED and not ran_out(k)
        and (receipts[k] == ''
             or receipts[k] == struct.pack(RECEIPT_ARG, seq, delivery_at(k, seq, attempts))) then
      finished(k, id, topic)
    else
      local j
      if seen ~= GONE then
        -- An id met before in this batch is read again: an earlier item may
        -- have changed it.
        if seen then
          j = load(id)
        elseif v then
          j = decode(id, v)
        end
      end
      if j == nil then
        out[k] = 'not_found'
      else
        local changed
        if j.state == RESERVED and not seen then
          if ran_out(k) then
            expire(j)
            changed = true
          end
        else
          changed = settle_job(j)
        end
        if changed then save(j) end
        met[id] = SEEN
        local code, _, status = check_reservation(j, receipts[k])
        if code then
          out[k] = status
        else
          finished(k, id, j.topic)
        end
      end
    end
  end
  if #gone_ids > 0 then
    redis.call('HDEL', K_JOBS, unpack(gone_ids))
    redis.call('ZREM', K_RESERVED, unpack(gone_ids))
    forget_given(gone_ids)
    forget_rttr(gone_ids)
    for _, t in ipairs(topic_order) do
      hincr(K_TOPICS, t, -per_topic[t])
      hincr(K_RESERVING, t, -per_topic[t])
    end
    count('finished', #gone_ids)
  end
  commit()
  return out
end

return run(main)
