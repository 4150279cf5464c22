#!lua
-- reserve: hands out ready jobs of the given topics in one bucket to several
-- groups (the reserves of one round that chose this bucket, each with its own
-- topics and count), so a round costs one reserve per bucket however many
-- groups it has. Each group gets up to its count, best first across its
-- topics: priority, then run_at, then order of adding (seq). Groups are
-- served in the order given, and a job taken by one is not seen by the next
-- (their topics may overlap: [x] and [x, y]), so no job goes to two groups.
-- Paused topics are skipped (a pause whose end <= now_ms is over). The caller
-- merges the replies of several buckets (docs/redis-store.md, "Reserving
-- across buckets").
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  ttr_ms, 0..2^32-1: the TTR of every reservation this call makes;
--          0: each job's own (ReserveRequest::ttr_ms). Not 0: kept in rttr
--          while the job is reserved, so a touch extends by it too.
-- ARGV[3]  G, the number of groups (1..1000)
-- then per group:
--          count, 1..1000
--          k, 1..100: how many topics follow
--          k topics (repeats are ignored)
--          The counts of all groups sum to at most 1000, the k to at most 1000.
-- Reply    per group in the order given: n, the number of jobs it got
--          (0..count), then 3 fields per job, best first: id, the job's
--          record as now stored (state reserved, attempts counted; see
--          docs/redis-store.md "The record") and its deliveries given back
--          (an integer, almost always 0). The caller reads the rest from the
--          record: topic, body, attempts, ttr, priority, run_at; the receipt
--          from seq and the delivery number, attempts + given back;
--          reserved_until_ms = now_ms + ttr_ms (ARGV[2]'s when not 0).
--          (The record is the string this script writes anyway: no field is
--          cut out or formatted per job.)
-- Errors   invalid_argument naming groups, count or topics (nothing changed).
--
-- First settles the bucket, once for all groups (up to 100 due jobs and 100
-- expired reservations), so a reserve never misses a job that is due,
-- whatever the promoters did. Each delivery counts an attempt; its receipt is
-- 16 hex digits of seq and 8 of the delivery number. Counter: reserves.
--!include lib.lua

-- Takes up to `want` of the best ready members of the open topics `open` out
-- of their ready sets, best first, and appends their ids to `ids` and their
-- topics to `tops` (so no record is read for its topic). Returns how many it
-- took.
local function pick(open, want, ids, tops)
  if #open == 1 then
    -- ZRANGE and ZREMRANGEBYRANK rather than ZPOPMIN, whose reply carries
    -- every member's score formatted as a double.
    local topic = open[1]
    local key = kr(topic)
    local l = redis.call('ZRANGE', key, 0, want - 1)
    if #l > 0 then redis.call('ZREMRANGEBYRANK', key, 0, #l - 1) end
    local n = #ids
    for i = 1, #l do
      ids[n + i] = id_of_ready(l[i])
      tops[n + i] = topic
    end
    return #l
  end
  -- Merge the first `want` of each topic; then remove what was taken (the
  -- first members of each, in the order ZRANGE listed them).
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
  local took = 0
  while took < want do
    local best
    for _, h in ipairs(heads) do
      if h.pos <= #h.l and (best == nil or h.p < best.p
          or (h.p == best.p and (h.r < best.r or (h.r == best.r and h.s < best.s)))) then
        best = h
      end
    end
    if best == nil then break end
    ids[#ids + 1] = id_of_ready(best.l[best.pos])
    tops[#ids] = best.topic
    took = took + 1
    best.taken = best.taken + 1
    best.pos = best.pos + 2
    if best.pos <= #best.l then key_at(best) end
  end
  for _, h in ipairs(heads) do
    if h.taken > 0 then redis.call('ZREMRANGEBYRANK', kr(h.topic), 0, h.taken - 1) end
  end
  return took
end

local function main()
  read_now()
  local override = int_arg(2, 'ttr_ms', 0, 4294967295)
  local groups = read_groups(3, 'count')

  settle_bucket(SETTLE_LIMIT)
  local paused = {}  -- topic -> paused now: read once however many groups name it
  -- Every group picks in turn; their records are then read and written
  -- together: one HMGET and one HSET for the whole call.
  local ids, tops, picked = {}, {}, {}  -- picked[g]: how many of ids group g took
  for g, group in ipairs(groups) do
    local open = {}
    for _, t in ipairs(group.topics) do
      if paused[t] == nil then paused[t] = paused_now(t) end
      if not paused[t] then open[#open + 1] = t end
    end
    picked[g] = #open > 0 and pick(open, group.n, ids, tops) or 0
  end
  local out = {}
  if #ids == 0 then
    commit()
    for g = 1, #groups do out[g] = 0 end
    return out
  end

  local vals = redis.call('HMGET', K_JOBS, unpack(ids))
  local givens = has_given() and redis.call('HMGET', K_GIVEN, unpack(ids))
  local hset, zadd = {}, {}
  local deadlines = {}  -- ttr -> now_ms + ttr as text, formatted once per ttr (Redis
                        -- would format each number score it is given as a double)
  local per_topic, topic_order = {}, {}
  -- Lengths kept by hand: `#t` is a search per append. hset and zadd have
  -- 2 * handed entries each.
  local handed, at, o = 0, 0, 0
  for g = 1, #groups do
    o = o + 1
    local count_at, got = o, 0
    out[o] = 0  -- its count, set below (a hole would put what follows in the hash part)
    for i = at + 1, at + picked[g] do
      local v = vals[i]
      if v then
        -- The fields it needs as locals (no table per job: see decode).
        local _, attempts, _, ttr = struct.unpack(HEAD_TTR, v)
        local id = ids[i]
        -- State and attempts lead the record: the rest is copied as it is.
        local rec = with_head(v, struct.pack('>BI4', RESERVED, attempts + 1))
        local h = 2 * handed
        hset[h + 1] = id
        hset[h + 2] = rec
        if override ~= 0 then ttr = override end
        local deadline = deadlines[ttr]
        if deadline == nil then
          deadline = fmt(NOW + ttr)
          deadlines[ttr] = deadline
        end
        zadd[h + 1] = deadline
        zadd[h + 2] = id
        out[o + 1] = id
        out[o + 2] = rec
        local given = givens and givens[i]
        out[o + 3] = given and given_in(given, (struct.unpack('>I7', v, 24))) or 0
        o = o + 3
        got = got + 1
        tally(per_topic, topic_order, tops[i])
        handed = handed + 1
      end
    end
    out[count_at] = got
    at = at + picked[g]
  end
  if handed > 0 then
    redis.call('HSET', K_JOBS, unpack(hset))
    redis.call('ZADD', K_RESERVED, unpack(zadd))
    if override ~= 0 then
      -- zadd holds deadline, id pairs: the same shape, the TTR for the deadline.
      local rttr, text = {}, fmt(override)
      for i = 2, 2 * handed, 2 do
        rttr[i - 1] = zadd[i]
        rttr[i] = text
      end
      redis.call('HSET', K_RTTR, unpack(rttr))
      any_rttr = true
    end
    for _, t in ipairs(topic_order) do hincr(K_RESERVING, t, per_topic[t]) end
    count('reserves', handed)
  end
  commit()
  return out
end

return run(main)
