-- lib.lua: the code every delayq script shares. Not a script by itself: a
-- script's line "--!include lib.lua" is replaced by this file before the text
-- is sent to Redis (docs/redis-store.md, "Assembling a script"), so these
-- locals are locals of the script's main chunk.
--
-- Format 1 of the Redis store (docs/redis-store.md has the key layout, the
-- record layout and each script's contract). Rules every script keeps:
--  - every key it touches is KEYS[1] .. ':' .. suffix (one bucket, one slot);
--  - time is ARGV[1] (now_ms, the caller's wall clock), never TIME; except
--    in the push scripts (subscriptions.lua, push_ledger.lua), which read
--    Redis's TIME so that every server sees one clock (redis_time, below);
--  - all input is checked before the first write, so an error reply means
--    nothing changed (except what time alone explains: settling, below);
--  - work per call is bounded (batches <= MAX_BATCH, settling <= a limit).

--!include base.lua

local K_META = B .. ':meta'            -- hash: format, buckets, seq, counters
local K_JOBS = B .. ':jobs'            -- hash: id -> packed record
local K_TIMERS = B .. ':timers'        -- zset: topic -> earliest run_at of its delayed jobs
local K_RESERVED = B .. ':reserved'    -- zset: id -> TTR deadline (ms)
local K_TOPICS = B .. ':topics'        -- hash: topic -> live jobs in this bucket
local K_RESERVING = B .. ':reserving'  -- hash: topic -> reserved jobs in this bucket
local K_PAUSED = B .. ':paused'        -- hash: topic -> pause end (ms; -1 until resumed)
local K_GIVEN = B .. ':given'          -- hash: id -> deliveries given back: seq (7), n (4)
local K_RTTR = B .. ':rttr'            -- hash: id -> TTR (ms) of a reservation made with one
local CHANNEL = PREFIX .. ':wake'
local function kd(topic) return B .. ':d:' .. topic end  -- delayed of a topic
local function kr(topic) return B .. ':r:' .. topic end  -- ready of a topic
local function kb(topic) return B .. ':b:' .. topic end  -- buried of a topic

local FORMAT = 1
local DELAYED, READY, RESERVED, BURIED = 0, 1, 2, 3
local STATE_NAMES = { [0] = 'delayed', [1] = 'ready', [2] = 'reserved', [3] = 'buried' }
local STATE_READY = string.char(READY)  -- a record's first byte
local MAX_BATCH = 1000        -- jobs per add / finish / touch / delete, count per reserve
local MAX_TOPICS = 100        -- topics per group of a reserve / heads
local MAX_CALL_TOPICS = 1000  -- topics over all the groups of one reserve / heads
local SETTLE_LIMIT = 100      -- due jobs (and expired reservations) an ordinary call moves
local MAX_ERROR = 1024        -- bytes of last_error kept
local SEQ_PER_MS = 1024       -- seq = ms * 1024 + counter: exact in a double until 2248
local MAX_NOW = 8796093022207 -- 2^43 - 1: keeps now * SEQ_PER_MS below 2^53
local MAX_RUN_AT = 253402300799999  -- 9999-12-31, as job.h
local MAX_DELAY = 3153600000000     -- 100 years, as job.h

-- The record: state, attempts, priority, ttr_ms, max_attempts, run_at_ms (6
-- bytes), seq (7 bytes), topic (1-byte length), last_error (2-byte length),
-- then the body to the end. 33 bytes + topic + last_error + body.
local REC = '>BI4I4I4I4I6I7Bc0Hc0'
local REC_BODY = REC .. 'c0'   -- packing: the body too (c0 packs a whole string)
local HEAD = '>BI4I4I4I4I6I7'  -- the fixed part alone
local HEAD_TTR = '>BI4I4I4'  -- the fixed part through ttr_ms
local HEAD_TOPIC = HEAD .. 'Bc0'  -- and the topic
local REC_HEAD_TOPIC_ERR = HEAD_TOPIC .. 'H'  -- and last_error's length

-- The record `v` with its first 1 or 5 bytes (state; state and attempts)
-- replaced by `head`. gsub makes one new string where string.sub and a
-- concatenation (or pack) would make two, and Redis's Lua hashes every byte
-- of every string it makes (deps/lua/src/lstring.c: step 1).
local new_head
local function put_head() return new_head end  -- a function: no % escapes
local HEAD_PATTERNS = { [1] = '^.', [5] = '^.....' }
local function with_head(v, head)
  new_head = head
  return (string.gsub(v, HEAD_PATTERNS[#head], put_head, 1))
end

-- The record `rec` with its seq (bytes 24-30) replaced.
local function with_seq(rec, seq)
  return string.sub(rec, 1, 23) .. struct.pack('>I7', seq) .. string.sub(rec, 31)
end

-- Topics repeat within a call (a batch names a few topics many times): each
-- is checked once.
local topic_ok = {}
local function check_topic(t, name, job)
  if topic_ok[t] then return t end
  if type(t) ~= 'string' or #t == 0 or #t > 200 or not string.find(t, '^[A-Za-z0-9._:-]+$') then
    abort('invalid_argument', field_name(name or 'topic', job) .. ': 1-200 bytes of [A-Za-z0-9._:-]')
  end
  topic_ok[t] = true
  return t
end

-- An id's length. That an id has no control characters is the API's rule,
-- checked by every caller before a script runs (ValidateId): scanning each
-- id's bytes again here cost add 5% of its Redis CPU. A stored id is any
-- bytes to the scripts.
local function check_id(id, name, job)
  if type(id) ~= 'string' or #id == 0 or #id > 256 then
    abort('invalid_argument', field_name(name or 'id', job) .. ': 1-256 bytes')
  end
  return id
end

-- The groups of a reserve or heads call (several waiters' requests served by
-- one call), from ARGV[first]: their number G, then per group n (`name`:
-- count or m), k and k topics. Returns { { n = n, topics = {...} }, ... } in
-- the order given, each group's topics deduplicated in their order. The n of
-- all groups sum to at most MAX_BATCH and the topics to at most
-- MAX_CALL_TOPICS, so a call does no more work than one group of the largest
-- size (a group reads at most n entries of each of its topics).
local function read_groups(first, name)
  local count = int_arg(first, 'groups', 1, MAX_BATCH)
  local groups, at, total, named = {}, first + 1, 0, 0
  for g = 1, count do
    local n = int_arg(at, name, 1, MAX_BATCH)
    local k = int_arg(at + 1, 'topics', 1, MAX_TOPICS)
    if at + 1 + k > #ARGV then
      abort('invalid_argument', 'topics: group ' .. fmt(g) .. ' names ' .. fmt(k)
        .. ' topics, fewer are given')
    end
    total, named = total + n, named + k
    if total > MAX_BATCH then
      abort('invalid_argument', name .. ': at most ' .. fmt(MAX_BATCH) .. ' over all groups')
    end
    if named > MAX_CALL_TOPICS then
      abort('invalid_argument', 'topics: at most ' .. fmt(MAX_CALL_TOPICS) .. ' over all groups')
    end
    local topics, seen = {}, {}
    for i = at + 2, at + 1 + k do
      local t = check_topic(ARGV[i], 'topics')
      if not seen[t] then
        seen[t] = true
        topics[#topics + 1] = t
      end
    end
    groups[g] = { n = n, topics = topics }
    at = at + 2 + k
  end
  if at <= #ARGV then
    abort('invalid_argument', 'groups: ' .. fmt(#ARGV - at + 1)
      .. ' argument(s) left after the last group')
  end
  return groups
end

local NOW
local function read_now()
  NOW = int_arg(1, 'now_ms', 0, MAX_NOW)
  return NOW
end

-- --- records --------------------------------------------------------------------

local function decode(id, v)
  local state, attempts, priority, ttr, max_attempts, run_at, seq, topic, err, pos =
    struct.unpack(REC, v)
  return { id = id, state = state, attempts = attempts, priority = priority, ttr = ttr,
           max_attempts = max_attempts, run_at = run_at, seq = seq, topic = topic, err = err,
           raw = v, pos = pos }
end

local function body_of(j)
  if j.body == nil then j.body = string.sub(j.raw, j.pos) end
  return j.body
end

local function encode(j)
  return struct.pack(REC_BODY, j.state, j.attempts, j.priority, j.ttr, j.max_attempts, j.run_at,
                     j.seq, #j.topic, j.topic, #j.err, j.err, body_of(j))
end

local function load(id)
  local v = redis.call('HGET', K_JOBS, id)
  if not v then return nil end
  return decode(id, v)
end

local function save(j) redis.call('HSET', K_JOBS, j.id, encode(j)) end

-- Members: a ready member sorts (as bytes, among equal priority scores) by
-- run_at, then seq; a delayed member (score run_at) by seq.
local function ready_member(j) return struct.pack('>I6I7c0', j.run_at, j.seq, j.id) end
local function delayed_member(j) return struct.pack('>I7c0', j.seq, j.id) end
local function id_of_ready(m) return string.sub(m, 14) end
local function id_of_delayed(m) return string.sub(m, 8) end

-- Deliveries given back by unreserve, which takes the attempt back (attempts
-- goes down) but not the delivery: a receipt names delivery number attempts
-- + given, which nothing lowers, so no receipt is handed out twice. Rare, so
-- kept beside the record (whose layout stays): `given` entries, each for the
-- incarnation (seq) it names; one of an older incarnation counts 0.
local GIVEN = '>I7I4'
local any_given  -- whether the bucket has any entry: asked once per call
local function has_given()
  if any_given == nil then any_given = redis.call('EXISTS', K_GIVEN) == 1 end
  return any_given
end
-- The count in entry `v` (a reply value: false for none) if it is seq's.
local function given_in(v, seq)
  if not v then return 0 end
  local s, n = struct.unpack(GIVEN, v)
  if s ~= seq then return 0 end
  return n
end
local function given_of(j)
  if j.given == nil then
    j.given = has_given() and given_in(redis.call('HGET', K_GIVEN, j.id), j.seq) or 0
  end
  return j.given
end
local function set_given(j, n)
  j.given = n
  any_given = true
  redis.call('HSET', K_GIVEN, j.id, struct.pack(GIVEN, j.seq, n))
end
-- Drops the entries of jobs that are gone.
local function forget_given(ids)
  if #ids > 0 and has_given() then redis.call('HDEL', K_GIVEN, unpack(ids)) end
end
-- A reservation made by a reserve with a TTR of its own (ReserveRequest::
-- ttr_ms) lasts that long, and a touch extends it by as much: the TTR is kept
-- beside the record while the job is reserved, only for such reservations
-- (the others use the record's ttr_ms). Every way out of the reserved state
-- drops the entry (detach, expire_due, finish.lua).
local any_rttr  -- whether the bucket has any entry: asked once per call
local function has_rttr()
  if any_rttr == nil then any_rttr = redis.call('EXISTS', K_RTTR) == 1 end
  return any_rttr
end
-- The TTR of reserved job j's current reservation.
local function reservation_ttr(j)
  if not has_rttr() then return j.ttr end
  return tonumber(redis.call('HGET', K_RTTR, j.id)) or j.ttr
end
local function forget_rttr(ids)
  if #ids > 0 and has_rttr() then redis.call('HDEL', K_RTTR, unpack(ids)) end
end
-- The delivery number of a job whose entry holds `given` (mod 2^32: 8 hex digits).
local function delivery_number(attempts, given) return (attempts + given) % 4294967296 end

-- 16 hex digits of seq, 8 of the delivery number: unique per delivery of a
-- job (a replaced or re-added job has a new seq), as the engine's.
local RECEIPT = '%016x%08x'
local function receipt_of(j)
  return string.format(RECEIPT, j.seq, delivery_number(j.attempts, given_of(j)))
end
-- The receipt as finish, touch, release and bury take it: seq (7 bytes) and
-- delivery number (4), big-endian; the caller decodes the hex digits. Packing
-- two numbers costs a fraction of formatting them.
local RECEIPT_ARG = '>I7I4'
local function receipt_arg_of(j)
  return struct.pack(RECEIPT_ARG, j.seq, delivery_number(j.attempts, given_of(j)))
end

local function created_at(j) return math.floor(j.seq / SEQ_PER_MS) end

-- The next seq of this bucket: time-ordered (so seqs of different buckets
-- compare by age), strictly increasing even if callers' clocks step back, and
-- at least `seq_floor` (optional: a caller's own counter, which orders its adds
-- across buckets within one ms).
local last_seq
local function next_seq(seq_floor)
  if last_seq == nil then last_seq = tonumber(redis.call('HGET', K_META, 'seq') or '0') end
  last_seq = math.max(last_seq + 1, NOW * SEQ_PER_MS, seq_floor or 0)
  return last_seq
end
local function store_seq()
  if last_seq ~= nil then redis.call('HSET', K_META, 'seq', fmt(last_seq)) end
end

-- --- counts, counters, wake-ups ---------------------------------------------------

-- Adds n to a count hash field, dropping the field at zero.
local function hincr(key, field, n)
  if n ~= 0 and redis.call('HINCRBY', key, field, n) <= 0 then redis.call('HDEL', key, field) end
end

-- Adds one to counts[key]; a key counted for the first time is appended to
-- order (so the counts are written in a fixed order, key by key).
local function tally(counts, order, key)
  local c = counts[key]
  if c == nil then
    c = 0
    order[#order + 1] = key
  end
  counts[key] = c + 1
end

local counters, counter_order = {}, {}
local function count(name, n)
  n = n or 1
  if n == 0 then return end
  if counters[name] == nil then
    counters[name] = 0
    counter_order[#counter_order + 1] = name
  end
  counters[name] = counters[name] + n
end

local function paused_now(topic)
  local u = redis.call('HGET', K_PAUSED, topic)
  if not u then return false end
  u = tonumber(u)
  return u < 0 or u > NOW
end

-- Wake-ups. A topic whose ready set was empty before this script added to it
-- (or whose pause ended) is announced at commit() if it then has ready jobs
-- and is not paused: "r <bucket> <topic>". Under load ready sets are never
-- empty, so nothing is published.
local ready_was_empty, wake_order = {}, {}
local function will_add_ready(topic)
  if ready_was_empty[topic] == nil then
    ready_was_empty[topic] = redis.call('EXISTS', kr(topic)) == 0
    wake_order[#wake_order + 1] = topic
  end
end
local function wake_if_ready(topic)
  if ready_was_empty[topic] == nil then wake_order[#wake_order + 1] = topic end
  ready_was_empty[topic] = true
end

-- The bucket's next due time: earliest delayed run_at, pause end or (unless
-- without_reservations) TTR deadline; nil when nothing is scheduled.
local function earliest(without_reservations)
  local e
  local t = redis.call('ZRANGE', K_TIMERS, 0, 0, 'WITHSCORES')
  if t[2] then e = tonumber(t[2]) end
  if not without_reservations then
    local r = redis.call('ZRANGE', K_RESERVED, 0, 0, 'WITHSCORES')
    if r[2] and (e == nil or tonumber(r[2]) < e) then e = tonumber(r[2]) end
  end
  local p = redis.call('HVALS', K_PAUSED)
  for i = 1, #p do
    local u = tonumber(p[i])
    if u > 0 and (e == nil or u < e) then e = u end
  end
  return e
end

-- A script that may create a due time (a delayed run_at or a pause end)
-- calls measure_due() before it changes anything that earliest() reads;
-- commit() then publishes "d <bucket> <ms>" when the earliest new due time is
-- before the bucket's earliest announced one. TTR deadlines are not
-- announced (they would be, once per batch, under load): the server that
-- reserved knows them from the reply, and every promote reply includes them.
local due_before, due_measured, new_due = nil, false, nil
local function measure_due()
  if not due_measured then
    due_before = earliest(true)
    due_measured = true
  end
end
local function added_due(t)
  if new_due == nil or t < new_due then new_due = t end
end

-- Writes the counters and publishes the wake-ups. Every writing script calls
-- it before it returns, also before an error reply that follows a write.
local function commit()
  for _, name in ipairs(counter_order) do redis.call('HINCRBY', K_META, name, counters[name]) end
  counters, counter_order = {}, {}
  store_seq()
  for _, t in ipairs(wake_order) do
    if ready_was_empty[t] and redis.call('EXISTS', kr(t)) == 1 and not paused_now(t) then
      redis.call('PUBLISH', CHANNEL, 'r ' .. BUCKET .. ' ' .. t)
    end
  end
  ready_was_empty, wake_order = {}, {}
  if new_due ~= nil and due_measured and (due_before == nil or new_due < due_before) then
    redis.call('PUBLISH', CHANNEL, 'd ' .. BUCKET .. ' ' .. fmt(new_due))
  end
  due_before, due_measured, new_due = nil, false, nil
end

-- --- state transitions (one job; batches have their own loops) ----------------

local function refresh_timer(topic)
  local head = redis.call('ZRANGE', kd(topic), 0, 0, 'WITHSCORES')
  if head[1] then
    redis.call('ZADD', K_TIMERS, head[2], topic)
  else
    redis.call('ZREM', K_TIMERS, topic)
  end
end

-- Removes the job from the index of its state.
local function detach(j)
  local s = j.state
  if s == DELAYED then
    redis.call('ZREM', kd(j.topic), delayed_member(j))
    refresh_timer(j.topic)
  elseif s == READY then
    redis.call('ZREM', kr(j.topic), ready_member(j))
  elseif s == RESERVED then
    redis.call('ZREM', K_RESERVED, j.id)
    if has_rttr() then redis.call('HDEL', K_RTTR, j.id) end
    hincr(K_RESERVING, j.topic, -1)
  else
    redis.call('ZREM', kb(j.topic), j.id)
  end
end

local function attach_ready(j)
  will_add_ready(j.topic)
  j.state = READY
  redis.call('ZADD', kr(j.topic), j.priority, ready_member(j))
end

local function attach_delayed(j)
  j.state = DELAYED
  redis.call('ZADD', kd(j.topic), j.run_at, delayed_member(j))
  redis.call('ZADD', K_TIMERS, 'LT', j.run_at, j.topic)
  added_due(j.run_at)
end

local function attach_buried(j)
  j.state = BURIED
  redis.call('ZADD', kb(j.topic), j.seq, j.id)
  count('buried_total')
end

-- Ready or delayed by run_at against now: never early.
local function schedule(j)
  if j.run_at <= NOW then attach_ready(j) else attach_delayed(j) end
end

local function set_error(j, e) j.err = string.sub(e, 1, MAX_ERROR) end

-- A reservation ended without success (release, TTR), the job already
-- detached: buried if its attempts are used up, else due again at retry_at
-- (nil: ready now at its old place in line). Returns true if buried.
local function end_attempt(j, retry_at, e)
  if j.max_attempts ~= 0 and j.attempts >= j.max_attempts then
    local why = e
    if why ~= '' then why = why .. '; ' end
    set_error(j, why .. 'max_attempts (' .. fmt(j.max_attempts) .. ') used up')
    attach_buried(j)
    return true
  end
  set_error(j, e)
  if retry_at == nil then
    attach_ready(j)
  else
    j.run_at = retry_at
    schedule(j)
  end
  return false
end

-- The reservation of a detached job ran out; `ttr`: the reservation's.
local function time_out(j, ttr)
  count('timed_out')
  end_attempt(j, nil, 'ttr of ' .. fmt(ttr) .. ' ms ran out (attempt ' .. fmt(j.attempts) .. ')')
end

-- Ends the reservation of reserved job j, which ran out.
local function expire(j)
  local ttr = reservation_ttr(j)
  detach(j)
  time_out(j, ttr)
end

-- Acts on the time for one job, as the engine does at the start of every
-- call: a due delayed job becomes ready, an expired reservation ends. Returns
-- true if the job changed (the caller saves it). Sets j.deadline for a job that
-- stays reserved.
local function settle_job(j)
  if j.state == DELAYED and j.run_at <= NOW then
    detach(j)
    attach_ready(j)
    return true
  elseif j.state == RESERVED then
    local d = tonumber(redis.call('ZSCORE', K_RESERVED, j.id))
    if d ~= nil and d <= NOW then
      expire(j)
      return true
    end
    j.deadline = d
  end
  return false
end

-- Without a receipt the job must be reserved (not_reserved); with one, it
-- must be the current reservation's (stale_receipt). Returns code, message,
-- and the status a batch script answers for the job ("not_reserved <state>":
-- the caller's message names the state, as the engine's does).
local function check_reservation(j, receipt)
  if receipt == '' then
    if j.state == RESERVED then return nil end
    return 'not_reserved', quote(j.id) .. ' is ' .. STATE_NAMES[j.state] .. ', not reserved',
      'not_reserved ' .. STATE_NAMES[j.state]
  end
  if j.state == RESERVED and receipt_arg_of(j) == receipt then return nil end
  return 'stale_receipt', 'receipt does not match the current reservation of ' .. quote(j.id)
    .. ' (its TTR may have run out and it was handed out again)', 'stale_receipt'
end

-- Makes the jobs `ids` of `topic` ready, each at its place in line (ids no
-- longer in the pool are skipped). Only the state byte of a record changes:
-- no need to decode the body. Returns how many were made ready.
local function make_ready(topic, ids)
  local vals = redis.call('HMGET', K_JOBS, unpack(ids))
  local hset, zadd = {}, {}
  for i = 1, #ids do
    local v = vals[i]
    if v then
      local _, _, priority, _, _, run_at, seq = struct.unpack(HEAD, v)
      hset[#hset + 1] = ids[i]
      hset[#hset + 1] = with_head(v, STATE_READY)
      zadd[#zadd + 1] = priority
      zadd[#zadd + 1] = struct.pack('>I6I7', run_at, seq) .. ids[i]
    end
  end
  if #hset > 0 then
    will_add_ready(topic)
    redis.call('HSET', K_JOBS, unpack(hset))
    redis.call('ZADD', kr(topic), unpack(zadd))
  end
  return #hset / 2
end

-- --- acting on the time for the whole bucket ---------------------------------------

-- Moves up to `limit` due delayed jobs to ready, earliest first. Returns how many.
local function promote_due(limit)
  local moved = 0
  while moved < limit do
    local t = redis.call('ZRANGEBYSCORE', K_TIMERS, '-inf', NOW, 'LIMIT', 0, 1)
    local topic = t[1]
    if not topic then break end
    local dkey = kd(topic)
    local due = redis.call('ZRANGEBYSCORE', dkey, '-inf', NOW, 'LIMIT', 0, limit - moved)
    if #due > 0 then
      redis.call('ZREMRANGEBYRANK', dkey, 0, #due - 1)
      local ids = {}
      for i = 1, #due do ids[i] = id_of_delayed(due[i]) end
      make_ready(topic, ids)
      moved = moved + #due
    end
    refresh_timer(topic)
  end
  return moved
end

-- Ends up to `limit` expired reservations, earliest deadline first.
local function expire_due(limit)
  local ids = redis.call('ZRANGEBYSCORE', K_RESERVED, '-inf', NOW, 'LIMIT', 0, limit)
  if #ids == 0 then return 0 end
  redis.call('ZREMRANGEBYRANK', K_RESERVED, 0, #ids - 1)
  local vals = redis.call('HMGET', K_JOBS, unpack(ids))
  local ttrs = has_rttr() and redis.call('HMGET', K_RTTR, unpack(ids))
  forget_rttr(ids)
  for i = 1, #ids do
    if vals[i] then
      local j = decode(ids[i], vals[i])
      hincr(K_RESERVING, j.topic, -1)
      time_out(j, ttrs and tonumber(ttrs[i]) or j.ttr)
      save(j)
    end
  end
  return #ids
end

-- Pauses whose end has come are removed; their topics are announced.
local function end_pauses()
  local p = redis.call('HGETALL', K_PAUSED)
  for i = 1, #p, 2 do
    local u = tonumber(p[i + 1])
    if u > 0 and u <= NOW then
      redis.call('HDEL', K_PAUSED, p[i])
      wake_if_ready(p[i])
    end
  end
end

-- What the engine's Advance() does, for this bucket, bounded. Returns the
-- numbers of jobs promoted and of reservations timed out.
local function settle_bucket(limit)
  local promoted = promote_due(limit)
  local timed_out = expire_due(limit)
  end_pauses()
  return promoted, timed_out
end

-- A job as get and peek return it (14 fields; docs/redis-store.md "job info").
local function info(j)
  local until_ms, receipt = 0, ''
  if j.state == RESERVED then
    until_ms = j.deadline or tonumber(redis.call('ZSCORE', K_RESERVED, j.id)) or 0
    receipt = receipt_of(j)
  end
  return { j.id, j.topic, STATE_NAMES[j.state], body_of(j), j.priority, j.ttr, j.max_attempts,
           j.attempts, created_at(j), j.run_at, until_ms, receipt, j.err, j.seq }
end

-- --- push delivery (subscriptions.lua, push_ledger.lua) -----------------------
-- Their keys are under bucket 0's tag (KEYS[1] is "{<prefix>:0}"), which
-- exists at every bucket count, so a subscription, its slots and its
-- figures share one slot and one script sees them all.

local K_SUBS = B .. ':subs'  -- hash: "<name> <url>" -> subscription record
local function kpl(instance) return B .. ':push:l:' .. instance end  -- zset: lease -> expiry (ms)
local function kpf(instance) return B .. ':push:f:' .. instance end  -- hash: figures, tat_us


-- A subscription record's fixed head (docs/redis-store.md, "Subscriptions"):
-- version, created_ms, renewed_ms, expires_ms, ttl_ms. The rest is the
-- caller's, never read here.
local SUB_HEAD = '>BI6I6I6I6'
local SUB_HEAD_BYTES = 25
local SUB_VERSION = 1

-- Whether the instance of record `rec` has lapsed at now_ms.
local function sub_lapsed(rec, now_ms)
  local _, _, _, expires = struct.unpack(SUB_HEAD, rec)
  return expires ~= 0 and expires <= now_ms
end
