#!lua
-- schedule_fire: step 2 of a schedule's firing (docs/redis-store.md,
-- "Schedules"), in one job bucket: adds the firing's jobs of this bucket and
-- withdraws the ids it names, idempotently, so that the step may run again
-- (a server finishing another's claim) without adding a job twice. The
-- callers of a round share one call per bucket, any number of firings.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2..] 3 per entry, 1..1000 entries: kind, id, record
--          a <id> <record>  add the job as add.lua would (the record as add
--                   takes it: "What add is given"), unless the id is in
--                   T:fired (a firing added it within the last 10 minutes)
--                   or is a job of this bucket in any state
--          c <name> <claim>  claim a firing of schedule <name> here and make
--                   it with the <n> entries that follow, in one step: only in
--                   bucket 0, where the schedules are (a deployment of one
--                   bucket: every job is there too). <claim> is
--                   `>I7BI2I4c0Hc0`: revision, paused (0|1), n, the firing
--                   state, pause_reason, as schedules.lua's claim takes them.
--                   The following n entries are made only if the claim is
--                   applied, and without T:fired: the compare-and-set and
--                   the jobs are one step, so no step runs again.
--          w <id> ""        delete the job if it is delayed (a firing added
--                   ahead that is not due yet), and forget it in T:fired, so
--                   that a later claim may add that id again (a resume, a
--                   changed definition); any other state is kept. The caller
--                   puts a firing's withdrawals before its adds: a firing
--                   that re-plans a fire time withdraws the old job first
-- Reply    one status per entry, in order: a → "ready" | "delayed" (added),
--          "exists" (a job of that id is there), "fired" (in T:fired);
--          w → "deleted" | "kept" | "absent"; c → schedules.lua's claim
--          reply ({"applied"|"stale", record} or {"pending", record,
--          pending}, or the error of a claim that failed: not_found), and
--          "skipped" for each of its n entries when it was not applied
-- Errors   invalid_argument naming the field and the entry's index
--          (nothing changed).
--
-- T:fired (zset: id -> now_ms of the call that added it, or found it
-- there) remembers the ids added for 10 minutes, by the callers' clock:
-- entries older are removed by every call. A job added, then finished,
-- is thus not added again by a late re-run of its step. Counters: added,
-- deleted.
--!include lib.lua
--!include schedule_record.lua

local FIELDS = 3
local K_FIRED = B .. ':fired'
local FIRED_KEEP_MS = 600000  -- 10 minutes

local function main()
  read_now()
  local n = (#ARGV - 1) / FIELDS
  if n < 1 or n > MAX_BATCH or n ~= floor(n) then
    abort('invalid_argument', 'entries: expected 1..' .. MAX_BATCH .. ' groups of ' .. FIELDS
      .. ' fields (kind, id, record) after now_ms')
  end
  local kinds, ids, recs, claims = {}, {}, {}, {}
  for k = 1, n do
    local a = 1 + (k - 1) * FIELDS
    local kind = ARGV[a + 1]
    kinds[k] = kind
    if kind == 'c' then
      if BUCKET ~= '0' then
        abort('invalid_argument', field_name('kind', k) .. ': c (claim) only in bucket 0')
      end
      ids[k] = check_name(ARGV[a + 2])
      local c = ARGV[a + 3]
      if #c < 16 or #c < 16 + struct.unpack('>I4', c, 11) then
        abort('invalid_argument', field_name('claim', k) .. ': cut short')
      end
      local revision, paused, m, state, reason_len = struct.unpack('>I7BI2I4c0H', c)
      if #c ~= 16 + #state + reason_len then
        abort('invalid_argument', field_name('claim', k) .. ': not revision, paused, n, state, reason')
      end
      if revision > MAX_REVISION or paused > 1 or k + m > n then
        abort('invalid_argument', field_name('claim', k) .. ': revision, paused (0|1) or n (' .. fmt(m)
          .. ' entries after it) out of range')
      end
      claims[k] = { revision = revision, paused = paused, n = m, state = state,
                    reason = string.sub(c, #c - reason_len + 1) }
    else
      ids[k] = check_id(ARGV[a + 2], 'id', k)
    end
    if kind == 'a' then
      local rec = ARGV[a + 3]
      if #rec < 33 or #rec < 33 + string.byte(rec, 31) then
        abort('invalid_argument', field_name('record', k) .. ': ' .. fmt(#rec)
          .. ' bytes, shorter than its fixed fields and topic')
      end
      local state, attempts, _, ttr, _, run_at, seq, topic, err_len =
        struct.unpack(REC_HEAD_TOPIC_ERR, rec)
      check_topic(topic, 'topic', k)
      if run_at > MAX_RUN_AT then
        abort('invalid_argument', field_name('run_at_ms', k) .. ': at most ' .. fmt(MAX_RUN_AT))
      end
      if ttr == 0 then abort('invalid_argument', field_name('ttr_ms', k) .. ': at least 1') end
      if seq > MAX_NOW * SEQ_PER_MS then
        abort('invalid_argument', field_name('seq', k) .. ': at most '
          .. fmt(MAX_NOW * SEQ_PER_MS))
      end
      if state ~= (run_at <= NOW and READY or DELAYED) or attempts ~= 0 or err_len ~= 0 then
        abort('invalid_argument', field_name('record', k) .. ': a new job is ready (1) if due '
          .. 'by now_ms, else delayed (0), with 0 attempts and no last_error')
      end
      recs[k] = rec
    elseif kind ~= 'w' and kind ~= 'c' then
      abort('invalid_argument', field_name('kind', k) .. ': a (add), w (withdraw) or c (claim)')
    end
  end

  measure_due()
  redis.call('ZREMRANGEBYSCORE', K_FIRED, '-inf', '(' .. fmt(NOW - FIRED_KEEP_MS))
  local out, added, deleted = {}, 0, 0
  local due_min = {}  -- topic -> earliest run_at of the delayed jobs added
  local skip_to, claimed_to = 0, 0  -- the entries of a claim not applied; of one applied
  for k = 1, n do
    local id = ids[k]
    local one_step = k <= claimed_to
    if k <= skip_to then
      out[k] = 'skipped'
    elseif kinds[k] == 'c' then
      local c = claims[k]
      local ok, what, rec, pending = pcall(claim_record, id, c.revision, c.paused, c.state, c.reason)
      if ok then
        out[k] = { what, rec, pending }
      elseif aborted then
        out[k] = redis.error_reply(aborted)
        aborted = nil
      else
        error(what, 0)
      end
      if ok and what == 'applied' then claimed_to = k + c.n else skip_to = k + c.n end
    elseif kinds[k] == 'a' then
      if not one_step and redis.call('ZSCORE', K_FIRED, id) then
        out[k] = 'fired'
      elseif redis.call('HEXISTS', K_JOBS, id) == 1 then
        if not one_step then redis.call('ZADD', K_FIRED, NOW, id) end
        out[k] = 'exists'
      else
        local rec = recs[k]
        local _, _, priority, _, _, run_at, seq, topic = struct.unpack(HEAD_TOPIC, rec)
        local s = next_seq(seq)
        if s ~= seq then rec = with_seq(rec, s) end
        if run_at <= NOW then
          will_add_ready(topic)
          redis.call('ZADD', kr(topic), priority, struct.pack('>I6I7c0', run_at, s, id))
          out[k] = 'ready'
        else
          redis.call('ZADD', kd(topic), run_at, struct.pack('>I7c0', s, id))
          -- The topic's timer once per call, at its earliest (below).
          if not due_min[topic] or run_at < due_min[topic] then due_min[topic] = run_at end
          added_due(run_at)
          out[k] = 'delayed'
        end
        redis.call('HSET', K_JOBS, id, rec)
        hincr(K_TOPICS, topic, 1)
        if not one_step then redis.call('ZADD', K_FIRED, NOW, id) end
        added = added + 1
      end
    else
      local j = load(id)
      if j == nil then
        out[k] = 'absent'
      else
        if settle_job(j) then save(j) end
        if j.state == DELAYED then
          detach(j)
          redis.call('HDEL', K_JOBS, id)
          redis.call('ZREM', K_FIRED, id)  -- a later claim may plan this fire time again
          forget_given({ id })
          hincr(K_TOPICS, j.topic, -1)
          deleted = deleted + 1
          out[k] = 'deleted'
        else
          out[k] = 'kept'
        end
      end
    end
  end
  for topic, run_at in pairs(due_min) do redis.call('ZADD', K_TIMERS, 'LT', run_at, topic) end
  count('added', added)
  count('deleted', deleted)
  commit()
  return out
end

return run(main)
