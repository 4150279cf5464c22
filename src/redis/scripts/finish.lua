#!lua
-- finish: acknowledges a batch of reserved jobs of one bucket; each is gone.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2..] 2 per job, 1..1000 jobs: id, receipt ("" skips the check)
-- Reply    one status per job, in order: "ok" | "not_found" | "not_reserved"
--          (no receipt and the job is not reserved) | "stale_receipt" (a
--          receipt that is not the job's current reservation's, also when
--          the job is no longer reserved)
-- Errors   invalid_argument for a malformed batch (nothing changed).
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
    ids[k] = check_id(ARGV[2 * k], 'id')
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
  -- Whether job k's reservation has run out (only asked of a reserved job).
  local function ran_out(k)
    if deadlines == nil then return false end
    local d = tonumber(deadlines[k])
    return d ~= nil and d <= NOW
  end

  local out, gone, seen = {}, {}, {}
  local hdel, zrem = {}, {}
  local per_topic, topic_order = {}, {}
  local function finished(k, id, topic)
    out[k] = 'ok'
    gone[id] = true
    hdel[#hdel + 1] = id
    zrem[#zrem + 1] = id
    tally(per_topic, topic_order, topic)
  end
  for k = 1, n do
    local id = ids[k]
    local v = vals[k]
    -- The common case first, without decoding the record: a job reserved
    -- once in this batch, its reservation running, its receipt right.
    local state, attempts, seq, topic, _
    if v and not seen[id] then
      state, attempts, _, _, _, _, seq, topic = struct.unpack(HEAD_TOPIC, v)
    end
    if state == RESERVED and not ran_out(k)
        and (receipts[k] == '' or receipts[k] == string.format(RECEIPT, seq, attempts)) then
      seen[id] = true
      finished(k, id, topic)
    else
      local j
      if not gone[id] then
        -- An id met before in this batch is read again: an earlier item may
        -- have changed it.
        if seen[id] then
          j = load(id)
        elseif v then
          j = decode(id, v)
        end
      end
      if j == nil then
        out[k] = 'not_found'
      else
        local changed
        if j.state == RESERVED and not seen[id] then
          if ran_out(k) then
            detach(j)
            time_out(j)
            changed = true
          end
        else
          changed = settle_job(j)
        end
        if changed then save(j) end
        seen[id] = true
        local code = check_reservation(j, receipts[k])
        if code then
          out[k] = code
        else
          finished(k, id, j.topic)
        end
      end
    end
  end
  if #hdel > 0 then
    redis.call('HDEL', K_JOBS, unpack(hdel))
    redis.call('ZREM', K_RESERVED, unpack(zrem))
    for _, t in ipairs(topic_order) do
      hincr(K_TOPICS, t, -per_topic[t])
      hincr(K_RESERVING, t, -per_topic[t])
    end
    count('finished', #hdel)
  end
  commit()
  return out
end

return run(main)
