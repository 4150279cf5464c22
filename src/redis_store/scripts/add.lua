#!lua
-- add: adds a batch of jobs to one bucket (the caller groups jobs by bucket).
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2..] 3 per job, 1..1000 jobs: id, flags, record
--          flags: [r][g][k<window_ms>:<key>]: r replaces a live job; k
--          makes the add idempotent under <key> (1-64 of [A-Za-z0-9_-]) for
--          window_ms; g says the caller generated the id (the key alone
--          then names the add, and the caller keeps a keyed add with a
--          generated id in the key's bucket)
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
--          ("exists": a live id without replace; that job is unchanged) |
--          "dedup <state> <run_at_ms> <id>" (a keyed add already applied
--          within its window: nothing changed; what the first one answered).
-- Errors   invalid_argument naming the field and the job's index (nothing
--          is added then, not even the valid jobs).
--
-- A job due by now_ms goes straight to ready. Replace re-creates a live job
-- from the new fields in one step, whatever its state: new seq (so it goes to
-- the back of its line and an outstanding receipt goes stale), attempts 0,
-- last_error cleared. Counters: added (every job added, replacing or not),
-- replaced.
--
-- Idempotent adds: an add with a key is remembered in the string
-- <bucket>:k:<key>:<id> (<bucket>:k:<key> when g), "<expires_ms> <state>
-- <run_at_ms> <id>", expires_ms = now_ms + window_ms. Until then (by the
-- callers' clock, as every time here) an add with that key and id changes
-- nothing and is answered from it, whatever became of the job (finished,
-- deleted, replaced): no tombstone is written when a job goes. PX window_ms
-- removes the string about when it no longer counts.
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
  local dkeys, dwins = {}, {}
  local any_delayed, dup, seen = false, false, {}
  for k = 1, n do
    local a = 1 + (k - 1) * FIELDS
    local id = check_id(ARGV[a + 1], 'id', k)
    ids[k] = id
    local rep, gen, idem = string.match(ARGV[a + 2], '^(r?)(g?)(.*)$')
    reps[k] = rep == 'r'
    if idem ~= '' then
      local win, key = string.match(idem, '^k(%d+):([%w_%-]+)$')
      if not win or #key > 64 or tonumber(win) < 1 then
        abort('invalid_argument', field_name('flags', k) .. ': [r][g][k<window_ms>:<key>]')
      end
      dkeys[k] = B .. ':k:' .. key .. (gen == 'g' and '' or (':' .. id))
      dwins[k] = tonumber(win)
    elseif gen ~= '' then
      abort('invalid_argument', field_name('flags', k) .. ': g without a key')
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
  local function add_one(k)
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
      return
    end
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
    if dkeys[k] then
      redis.call('SET', dkeys[k], fmt(NOW + dwins[k]) .. ' ' .. out[k] .. ' ' .. fmt(run_at) .. ' '
        .. id, 'PX', dwins[k])
    end
  end

  for k = 1, n do
    -- A keyed add already applied: answered as it was, nothing changed.
    local first = dkeys[k] and redis.call('GET', dkeys[k])
    local expires, answer
    if first then expires, answer = string.match(first, '^(%d+) (.*)$') end
    if answer and tonumber(expires) > NOW then
      out[k] = 'dedup ' .. answer
    else
      add_one(k)
    end
  end
  flush()
  count('added', added)
  commit()
  return out
end

return run(main)
