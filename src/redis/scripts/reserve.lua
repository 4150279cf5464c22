#!lua
-- reserve: hands out up to `count` ready jobs of the given topics in one
-- bucket, best first across the topics: priority, then run_at, then order of
-- adding (seq). Paused topics are skipped (a pause whose end <= now_ms is
-- over). The caller merges the replies of several buckets (docs/redis-store.md,
-- "Reserving across buckets").
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  count, 1..1000
-- ARGV[3..] topics, 1..100 (repeats are ignored)
-- Reply    9 fields per job handed out, best first (empty array: none):
--          id, topic, body, receipt, attempts, ttr_ms, priority, run_at_ms,
--          reserved_until_ms (= now_ms + ttr_ms)
-- Errors   invalid_argument naming count or topics.
--
-- First settles the bucket (up to 100 due jobs and 100 expired reservations),
-- so a reserve never misses a job that is due, whatever the promoters did.
-- Each delivery counts an attempt; its receipt is 16 hex digits of seq and 8
-- of attempts. Counter: reserves.
--!include lib.lua

local function main()
  read_now()
  local want = int_arg(2, 'count', 1, MAX_BATCH)
  if #ARGV - 2 < 1 or #ARGV - 2 > MAX_TOPICS then
    abort('invalid_argument', 'topics: give 1..' .. MAX_TOPICS .. ' topics')
  end
  local topics, seen = {}, {}
  for i = 3, #ARGV do
    local t = check_topic(ARGV[i], 'topics')
    if not seen[t] then
      seen[t] = true
      topics[#topics + 1] = t
    end
  end

  settle_bucket(SETTLE_LIMIT)
  local open = {}
  for _, t in ipairs(topics) do
    if not paused_now(t) then open[#open + 1] = t end
  end

  -- picks[i] = { topic, ready member }, best first.
  local picks = {}
  if #open == 1 then
    local popped = redis.call('ZPOPMIN', kr(open[1]), want)
    for i = 1, #popped, 2 do picks[#picks + 1] = { open[1], popped[i] } end
  elseif #open > 1 then
    -- Merge the first `want` of each topic; then pop what was taken (the
    -- same members: ZPOPMIN takes them in the order ZRANGE listed them).
    local heads = {}
    local function key_at(h)
      local run_at, seq = struct.unpack('>I6I7', h.l[h.pos])
      h.p, h.r, h.s = tonumber(h.l[h.pos + 1]), run_at, seq
    end
    for _, t in ipairs(open) do
      local l = redis.call('ZRANGE', kr(t), 0, want - 1, 'WITHSCORES')
      if #l > 0 then
        local h = { topic = t, l = l, pos = 1, taken = 0 }
        key_at(h)
        heads[#heads + 1] = h
      end
    end
    while #picks < want do
      local best
      for _, h in ipairs(heads) do
        if h.pos <= #h.l and (best == nil or h.p < best.p
            or (h.p == best.p and (h.r < best.r or (h.r == best.r and h.s < best.s)))) then
          best = h
        end
      end
      if best == nil then break end
      picks[#picks + 1] = { best.topic, best.l[best.pos] }
      best.taken = best.taken + 1
      best.pos = best.pos + 2
      if best.pos <= #best.l then key_at(best) end
    end
    for _, h in ipairs(heads) do
      if h.taken > 0 then redis.call('ZPOPMIN', kr(h.topic), h.taken) end
    end
  end
  if #picks == 0 then
    commit()
    return {}
  end

  local ids = {}
  for i, p in ipairs(picks) do ids[i] = id_of_ready(p[2]) end
  local vals = redis.call('HMGET', K_JOBS, unpack(ids))
  local hset, zadd, out = {}, {}, {}
  local per_topic, topic_order = {}, {}
  local handed = 0
  for i = 1, #ids do
    local v = vals[i]
    if v then
      local j = decode(ids[i], v)
      j.attempts = j.attempts + 1
      local until_ms = NOW + j.ttr
      -- State and attempts lead the record: the rest is copied as it is.
      hset[#hset + 1] = j.id
      hset[#hset + 1] = struct.pack('>BI4', RESERVED, j.attempts) .. string.sub(v, 6)
      zadd[#zadd + 1] = until_ms
      zadd[#zadd + 1] = j.id
      local o = #out
      out[o + 1] = j.id
      out[o + 2] = j.topic
      out[o + 3] = body_of(j)
      out[o + 4] = receipt_of(j)
      out[o + 5] = j.attempts
      out[o + 6] = j.ttr
      out[o + 7] = j.priority
      out[o + 8] = j.run_at
      out[o + 9] = until_ms
      if per_topic[j.topic] == nil then
        per_topic[j.topic] = 0
        topic_order[#topic_order + 1] = j.topic
      end
      per_topic[j.topic] = per_topic[j.topic] + 1
      handed = handed + 1
    end
  end
  if handed > 0 then
    redis.call('HSET', K_JOBS, unpack(hset))
    redis.call('ZADD', K_RESERVED, unpack(zadd))
    for _, t in ipairs(topic_order) do hincr(K_RESERVING, t, per_topic[t]) end
    count('reserves', handed)
  end
  commit()
  return out
end

return run(main)
