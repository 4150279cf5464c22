#!lua
-- add: adds a batch of jobs to one bucket (the caller groups jobs by bucket).
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2..] 8 per job, 1..1000 jobs:
--          id, topic, run_at_ms (absolute: the caller turns delay_ms into
--          now_ms + delay_ms), ttr_ms (1..2^32-1), priority (0..2^32-1),
--          max_attempts (0..2^32-1), flags, body
--          flags: "" or "r" (replace), optionally followed by "@<seq floor>"
--          (decimal, <= (2^43 - 1) * 1024): the job's seq is then at least
--          that. A caller that spreads its adds over buckets numbers them
--          from one counter, so its order of adding holds across buckets even
--          within one ms (seq alone is per bucket).
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

local FIELDS = 8

local function main()
  read_now()
  local n = (#ARGV - 1) / FIELDS
  if n < 1 or n > MAX_BATCH or n ~= math.floor(n) then
    abort('invalid_argument', 'jobs: expected 1..' .. MAX_BATCH .. ' groups of ' .. FIELDS
      .. ' fields after now_ms')
  end
  -- Check everything before the first write.
  local jobs, ids, any_delayed, dup = {}, {}, false, false
  local seen = {}
  for k = 1, n do
    local a = 1 + (k - 1) * FIELDS
    local of = ' (job ' .. k .. ')'
    local job = {
      id = check_id(ARGV[a + 1], 'id' .. of),
      topic = check_topic(ARGV[a + 2], 'topic' .. of),
      run_at = int_arg(a + 3, 'run_at_ms' .. of, 0, MAX_RUN_AT),
      ttr = int_arg(a + 4, 'ttr_ms' .. of, 1, MAX_U32),
      priority = int_arg(a + 5, 'priority' .. of, 0, MAX_U32),
      max_attempts = int_arg(a + 6, 'max_attempts' .. of, 0, MAX_U32),
      body = ARGV[a + 8],
    }
    local flags = ARGV[a + 7]
    local rep, floor = string.match(flags, '^(r?)@(%d+)$')
    if rep == nil then
      if flags ~= '' and flags ~= 'r' then
        abort('invalid_argument', 'flags' .. of .. ': "" or "r", optionally followed by "@<seq floor>"')
      end
      rep = flags
    else
      floor = tonumber(floor)
      if #ARGV[a + 7] > 20 or floor > MAX_NOW * SEQ_PER_MS then
        abort('invalid_argument', 'flags' .. of .. ': seq floor above ' .. fmt(MAX_NOW * SEQ_PER_MS))
      end
    end
    job.replace = rep == 'r'
    job.floor = floor
    if job.run_at > NOW then any_delayed = true end
    if seen[job.id] then dup = true end
    seen[job.id] = true
    jobs[k] = job
    ids[k] = job.id
  end

  if any_delayed then measure_due() end
  local existing = redis.call('HMGET', K_JOBS, unpack(ids))

  -- New records, index entries and counts are written in bulk; a job whose
  -- id came earlier in this batch first flushes them, then reads what is live.
  local pend
  local function reset()
    pend = { hset = {}, zadd = {}, zkeys = {}, timers = {}, tkeys = {}, topics = {}, topkeys = {} }
  end
  local function pend_zadd(key, score, member)
    local l = pend.zadd[key]
    if not l then
      l = {}
      pend.zadd[key] = l
      pend.zkeys[#pend.zkeys + 1] = key
    end
    l[#l + 1] = score
    l[#l + 1] = member
  end
  local function flush()
    if #pend.hset > 0 then redis.call('HSET', K_JOBS, unpack(pend.hset)) end
    for _, key in ipairs(pend.zkeys) do redis.call('ZADD', key, unpack(pend.zadd[key])) end
    for _, t in ipairs(pend.tkeys) do redis.call('ZADD', K_TIMERS, 'LT', pend.timers[t], t) end
    for _, t in ipairs(pend.topkeys) do hincr(K_TOPICS, t, pend.topics[t]) end
    reset()
  end
  reset()

  local out, done = {}, {}
  for k = 1, n do
    local job = jobs[k]
    local old
    if dup and done[job.id] then
      flush()
      old = load(job.id)
    elseif existing[k] then
      old = decode(job.id, existing[k])
    end
    done[job.id] = true
    if old and not job.replace then
      out[k] = 'exists'
    else
      if old then
        settle_job(old)  -- as the engine, time acts first (a TTR may run out)
        detach(old)
        hincr(K_TOPICS, old.topic, -1)
        count('replaced')
      end
      local j = { id = job.id, topic = job.topic, run_at = job.run_at, ttr = job.ttr,
                  priority = job.priority, max_attempts = job.max_attempts, attempts = 0,
                  seq = next_seq(job.floor), err = '', body = job.body }
      if j.run_at <= NOW then
        j.state = READY
        will_add_ready(j.topic)
        pend_zadd(kr(j.topic), j.priority, ready_member(j))
        out[k] = 'ready'
      else
        j.state = DELAYED
        pend_zadd(kd(j.topic), j.run_at, delayed_member(j))
        local t = pend.timers[j.topic]
        if t == nil then pend.tkeys[#pend.tkeys + 1] = j.topic end
        if t == nil or j.run_at < t then pend.timers[j.topic] = j.run_at end
        added_due(j.run_at)
        out[k] = 'delayed'
      end
      pend.hset[#pend.hset + 1] = j.id
      pend.hset[#pend.hset + 1] = encode(j)
      if pend.topics[j.topic] == nil then
        pend.topics[j.topic] = 0
        pend.topkeys[#pend.topkeys + 1] = j.topic
      end
      pend.topics[j.topic] = pend.topics[j.topic] + 1
      count('added')
    end
  end
  flush()
  commit()
  return out
end

return run(main)
