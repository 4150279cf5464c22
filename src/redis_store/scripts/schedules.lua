#!lua
-- schedules: the schedules of a deployment (periodic jobs), one hash under
-- bucket 0's tag, and the firings claimed but not yet cleared
-- (docs/redis-store.md, "Schedules"). A firing crosses slots (its jobs live
-- in their own buckets), so it is three steps: `claim` here, then
-- schedule_fire.lua in each job bucket, then `clear` here. Between the
-- first and the last, the claim's PENDING entry says what remains to do, so
-- any server can finish it.
--
-- KEYS[1]  bucket 0's tag "{<prefix>:0}"
-- ARGV[1]  the operation, then its arguments:
--   put <record>       creates the schedule, or replaces the definition of
--            the one of that name (the record's definition, paused flag):
--            created_ms, the firing state and pause_reason kept (reason
--            cleared when paused is 0), version and revision + 1 (1 and 1
--            for a new one), updated_ms = now. Reply: the record as stored.
--   delete <name>      removes the schedule and any PENDING of it. Reply:
--            the record as it was. Error not_found.
--   get <name>         Reply: {now_ms, record, pending} (pending "" when
--            none). Error not_found.
--   list               Reply: {now_ms, then per schedule record, pending},
--            unordered (the caller sorts).
--   claim and clear come as a batch: ARGV is a run of items of 7 fields
--   each (a clear's last four empty); the reply is an array with one reply
--   per item, in order, an error reply for an item that failed.
--   claim <name> <revision> <paused> <state> <pause_reason> <payload>
--            the compare-and-set of a firing. If the stored revision is not
--            <revision>: {"stale", record}. Else if a PENDING is there (a
--            claim whose jobs were not all made yet): {"pending", record,
--            pending}. Else the firing state becomes <state> and
--            <pause_reason> (paused set when <paused> is 1), revision + 1,
--            and when <payload> is not "" it is kept as the PENDING
--            {revision, now, payload}: {"applied", record}. Error not_found.
--   clear <name> <revision> "" "" "" ""  removes the PENDING made at <revision>
--            (another is kept). Reply: 1 removed, 0 not.
-- Errors   invalid_argument (operation, name, record, revision), nothing
--          changed; not_found as said.
--
-- The record and the claim's compare-and-set: schedule_record.lua (shared
-- with schedule_fire.lua, whose "c" entries claim and fire in one step).
-- A PENDING is `>BI7I6` (1, revision made, claimed at ms) and the payload,
-- the caller's (jobs and ids to withdraw), never looked into here.
--
-- Time is Redis's (TIME), as in subscriptions.lua: every server compares a
-- PENDING's age on one clock.
--!include base.lua
--!include schedule_record.lua

local function put(now)
  local given = unpack_record(ARGV[2], 'record')
  if #given.def < 1 or #given.def < 1 + string.byte(given.def, 1) then
    abort('invalid_argument', 'record: its definition does not start with a name')
  end
  -- The name leads the definition (1-byte length).
  local name = check_name(struct.unpack('>Bc0', given.def))
  local old = redis.call('HGET', K_SCHED, name)
  local r = given
  if old then
    r = unpack_record(old, 'stored record')
    if r.revision >= MAX_REVISION then abort('invalid_argument', 'revision: at its limit') end
    r.revision, r.version = r.revision + 1, r.version + 1
    r.def, r.paused = given.def, given.paused
  else
    r.revision, r.version, r.created = 1, 1, now
  end
  r.updated = now
  if r.paused == 0 then r.reason = '' end
  local stored = pack_record(r)
  redis.call('HSET', K_SCHED, name, stored)
  return stored
end

local function delete()
  local name = check_name(ARGV[2])
  local rec = load_record(name)
  redis.call('HDEL', K_SCHED, name)
  redis.call('HDEL', K_PENDING, name)
  return rec
end

local function get(now)
  local name = check_name(ARGV[2])
  local rec = load_record(name)
  return { now, rec, redis.call('HGET', K_PENDING, name) or '' }
end

local function list(now)
  local out = { now }
  local pending = {}
  local p = redis.call('HGETALL', K_PENDING)
  for i = 1, #p, 2 do pending[p[i]] = p[i + 1] end
  local all = redis.call('HGETALL', K_SCHED)
  for i = 1, #all, 2 do
    out[#out + 1] = all[i + 1]
    out[#out + 1] = pending[all[i]] or ''
  end
  return out
end

-- The item of a batch at ARGV[at..at+6] (see the contract above).
local function claim(now, at)
  local name = check_name(ARGV[at + 1])
  local revision = int_arg(at + 2, 'revision', 0, MAX_REVISION)
  local paused = int_arg(at + 3, 'paused', 0, 1)
  local state, reason, payload = ARGV[at + 4], ARGV[at + 5], ARGV[at + 6]
  if type(payload) ~= 'string' then
    abort('invalid_argument', 'claim: name, revision, paused, state, pause_reason, payload')
  end
  if #reason > 65535 then abort('invalid_argument', 'pause_reason: at most 65535 bytes') end
  local what, rec, pending = claim_record(name, revision, paused, state, reason)
  if what ~= 'applied' then return { what, rec, pending } end
  if payload ~= '' then
    local _, made = struct.unpack('>BI7', rec)
    redis.call('HSET', K_PENDING, name, struct.pack(PENDING_HEAD, 1, made, now) .. payload)
  end
  return { 'applied', rec }
end

local function clear(_, at)
  local name = check_name(ARGV[at + 1])
  local revision = int_arg(at + 2, 'revision', 0, MAX_REVISION)
  local pending = redis.call('HGET', K_PENDING, name)
  if not pending or #pending < 14 then return 0 end
  local _, made = struct.unpack(PENDING_HEAD, pending)
  if made ~= revision then return 0 end
  redis.call('HDEL', K_PENDING, name)
  return 1
end

local OPS = { put = put, delete = delete, get = get, list = list }
local ITEMS = { claim = claim, clear = clear }
local ITEM_FIELDS = 7

-- claim and clear come in batches (a round's firings share one call): one
-- reply per item, an error reply for an item that failed (not_found, a bad
-- argument), which changed nothing; the other items are not affected.
local function items(now)
  if #ARGV % ITEM_FIELDS ~= 0 then
    abort('invalid_argument', 'claim and clear: items of ' .. fmt(ITEM_FIELDS) .. ' fields')
  end
  local out = {}
  for at = 1, #ARGV, ITEM_FIELDS do
    local op = ITEMS[ARGV[at]]
    if not op then abort('invalid_argument', 'operation: claim or clear in a batch') end
    local ok, res = pcall(op, now, at)
    if ok then
      out[#out + 1] = res
    elseif aborted then
      out[#out + 1] = redis.error_reply(aborted)
      aborted = nil
    else
      error(res, 0)
    end
  end
  return out
end

local function main()
  local now = redis_time()
  if ITEMS[ARGV[1]] then return items(now) end
  local op = OPS[ARGV[1]]
  if not op then
    abort('invalid_argument', 'operation: put, delete, get, list, claim or clear')
  end
  return op(now)
end

return run(main)
