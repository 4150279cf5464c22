#!lua
-- add: adds a batch of jobs to one bucket (the caller groups jobs by bucket).
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2..] 3 per job, 1..1000 jobs: id, flags, record
--          flags: "" or "r" (replace a live job)
--          record: the job's record as it is to be stored (docs/redis-store.md,
--          "The record"), built by the caller: state 1 (ready) if run_at_ms
--          <= now_ms, else 0 (delayed); attempts 0; priority, ttr_ms (>= 1),
--          max_attempts; run_at_ms (absolute: the caller turns delay_ms into
--          now_ms + delay_ms; <= 253402300799999); seq: the caller's seq
--          floor, <= (2^43 - 1) * 1024 (the job's seq is at least that: a
--          caller that spreads its adds over buckets numbers them from one
--          counter, so its order of adding holds across buckets even within
--          one ms; seq alone is per bucket); topic; last_error empty; body.
--          The record is stored as given unless the bucket's seq has passed
--          the floor (another caller added in the same ms): then its seq is
--          rewritten. A record is thus passed and stored without being built
--          again here, the body with it.
-- Reply    one status per job, in order: "ready" | "delayed" | "exists"
--          ("exists": a live id without replace; that job is unchanged).
-- Errors   invalid_argument naming the field and the job's index (nothing
--          is added then, not even the valid jobs).
--
-- A job due by now_ms goes straight to ready. Replace re-creates a live job
-- from the new fields in one step, whatever its state: new seq (so it goes to
-- the back of its line and an outstanding receipt goes stale), attempts 0,
-- last_error cleared. Counters: added (every job added, replacing or not),
-- replaced.
--!include lib.lua

local FIELDS = 3

local function main()
  read_now()
  local n = (#ARGV - 1) / FIELDS
  if n < 1 or n > MAX_BATCH or n ~= floor(n) then
    abort('invalid_argument', 'jobs: expected 1..' .. MAX_BATCH .. ' groups of ' .. FIELDS
      .. ' fields (id, flags, record) after now_ms')
  end
  -- Check everything before the first write. The fields go into one array
  -- each (a table per job would cost more than the rest of the loop).
  local ids, topics, run_ats, prios, seqs, recs, reps = {}, {}, {}, {}, {}, {}, {}
  local any_delayed, dup, seen = false, false, {}
  for k = 1, n do
    local a = 1 + (k - 1) * FIELDS
    local id = check_id(ARGV[a + 1], 'id', k)
    ids[k] = id
    local flags = ARGV[a + 2]
    if flags == 'r' then
      reps[k] = true
    elseif flags ~= '' then
      abort('invalid_argument', field_name('flags', k) .. ': "" or "r"')
    end
    local rec = ARGV[a + 3]
    -- 33 bytes and the topic's and last_error's (both lengths are read first:
    -- unpack must not run past the end).
    if #rec < 33 or #rec < 33 + string.byte(rec, 31) then
      abort('invalid_argument', field_name('record', k) .. ': ' .. fmt(#rec)
        .. ' bytes, shorter than its fixed fields and topic')
    end
    local state, attempts, priority, ttr, _, run_at, seq, topic, err_len =
      struct.unpack(REC_HEAD_TOPIC_ERR, rec)
    check_topic(topic, 'topic', k)
    if run_at > MAX_RUN_AT then
      abort('invalid_argument', field_name('run_at_ms', k) .. ': at most ' .. fmt(MAX_RUN_AT)
        .. ', got ' .. fmt(run_at))
    end
    if ttr == 0 then abort('invalid_argument', field_name('ttr_ms', k) .. ': at least 1') end
    if seq > MAX_NOW * SEQ_PER_MS then
      abort('invalid_argument', field_name('seq', k) .. ': at most ' .. fmt(MAX_NOW * SEQ_PER_MS))
    end
    local due = run_at <= NOW
    if state ~= (due and READY or DELAYED) or attempts ~= 0 or err_len ~= 0 then
      abort('invalid_argument', field_name('record', k) .. ': a new job is ready (1) if due by '
        .. 'now_ms, else delayed (0), with 0 attempts and no last_error')
    end
    topics[k], run_ats[k], prios[k], seqs[k], recs[k] = topic, run_at, priority, seq, rec
    if not due then any_delayed = true end
    if seen[id] then dup = true end
    seen[id] = true
  end

  if any_delayed then measure_due() end
  local existing = redis.call('HMGET', K_JOBS, unpack(ids))

  -- New records, index entries and counts are written in bulk; a job whose
  -- id came earlier in this batch first flushes them, then reads what is live.
  local hset, zadd, zkeys, timers, tkeys, per_topic, topkeys
  local function reset()
    hset, zadd, zkeys, timers, tkeys, per_topic, topkeys = {}, {}, {}, {}, {}, {}, {}
  end
  local function flush()
    if #hset > 0 then redis.call('HSET', K_JOBS, unpack(hset)) end
    for _, key in ipairs(zkeys) do redis.call('ZADD', key, unpack(zadd[key])) end
    for _, t in ipairs(tkeys) do redis.call('ZADD', K_TIMERS, 'LT', timers[t], t) end
    for _, t in ipairs(topkeys) do hincr(K_TOPICS, t, per_topic[t]) end
    reset()
  end
  reset()

  -- Scores go to ZADD as text, each distinct value formatted once (Redis
  -- would format every number it is given as a double).
  local score_text = {}
  local function text(v)
    local t = score_text[v]
    if t == nil then
      t = fmt(v)
      score_text[v] = t
    end
    return t
  end

  local out, done, added = {}, {}, 0
  for k = 1, n do
    local id, topic = ids[k], topics[k]
    local old
    if dup and done[id] then
      flush()
      old = load(id)
    elseif existing[k] then
      old = decode(id, existing[k])
    end
    if dup then done[id] = true end
    if old and not reps[k] then
      out[k] = 'exists'
    else
      if old then
        settle_job(old)  -- as the engine, time acts first (a TTR may run out)
        detach(old)
        hincr(K_TOPICS, old.topic, -1)
        count('replaced')
      end
      local run_at, priority = run_ats[k], prios[k]
      local seq = next_seq(seqs[k])
      local rec = recs[k]
      if seq ~= seqs[k] then rec = with_seq(rec, seq) end
      local key, score, member
      if run_at <= NOW then
        key, score = kr(topic), priority
        member = struct.pack('>I6I7c0', run_at, seq, id)  -- ready_member
        will_add_ready(topic)
        out[k] = 'ready'
      else
        key, score = kd(topic), run_at
        member = struct.pack('>I7c0', seq, id)  -- delayed_member
        local t = timers[topic]
        if t == nil then tkeys[#tkeys + 1] = topic end
        if t == nil or run_at < t then timers[topic] = run_at end
        added_due(run_at)
        out[k] = 'delayed'
      end
      local l = zadd[key]
      if not l then
        l = {}
        zadd[key] = l
        zkeys[#zkeys + 1] = key
      end
      local m = #l
      l[m + 1] = text(score)
      l[m + 2] = member
      local h = #hset
      hset[h + 1] = id
      hset[h + 2] = rec
      tally(per_topic, topkeys, topic)
      added = added + 1
    end
  end
  flush()
  count('added', added)
  commit()
  return out
end

return run(main)
