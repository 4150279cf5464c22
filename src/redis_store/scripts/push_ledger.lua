#!lua
-- push_ledger: how the servers pushing one deployment's jobs count each
-- instance's requests together (serving/push_ledger.h; docs/redis-store.md,
-- "The push ledger"): slots held as leases, the rate, and the figures. One
-- call carries the ledger operations of a round, of any instances.
--
-- KEYS[1]  bucket 0's tag "{<prefix>:0}"
-- ARGV     operations, each a letter and its arguments (instance is
--          "<name> <url>", as subscriptions.lua's fields):
--   a <instance> <want> <lease_ms> <concurrency> <interval_us>   acquire
--   s <instance> <lease> <used> <ok> <at_ms> <error> <interval_us> settle
--   f <instance>                                                  figures
--   x <instance>                                                  forget
--          (interval_us: 1e6 / rate_per_s, rounded, >= 1; 0 without a rate;
--          used, ok: 0 or 1; at_ms: the answer's wall clock, 0: Redis's now)
-- Reply    one element per operation, in order:
--   a  { rate_wait_ms, lease... }: the leases granted (0..want), and when the
--      rate held slots back, the ms until the next start is allowed (else 0)
--   f  { in_flight, delivered, failed, last_success_ms, last_error_ms,
--      last_error }
--   s, x  1
-- Errors   invalid_argument (an operation or argument), nothing changed.
--
-- Acquire: the instance's expired leases go first; then up to
-- min(want, concurrency - live leases) are granted, each a lease scored by
-- its expiry (Redis TIME + lease_ms), named by a number from one counter
-- (unique across servers and instances). An instance that is not
-- subscribed, or has lapsed, gets none: it gets nothing, on any server.
-- The rate is a GCRA: the theoretical arrival time of the next start (µs,
-- Redis's clock) is kept in the figures hash; a start is allowed when it is
-- <= now, and moves it on by interval_us. No burst: an idle instance does
-- not save up starts, except within one ms when interval_us < 1000 (callers
-- time their next try in ms, so a rate above 1000/s grants up to a ms's worth
-- at once). Settle removes the lease; an unused one (no request made) gives
-- its start back to the rate when it was still held; figures count used
-- ones. Lease keys expire by themselves (PEXPIREAT of the latest lease).
--!include lib.lua

local K_PUSH_SEQ = B .. ':push:seq'  -- string: the last lease number issued
local MAX_WANT = 10000  -- as kMaxSubscriptionConcurrency
local MAX_LEASE_MS = 86400000
local MAX_INTERVAL_US = 3600000000  -- a start per hour: rate_per_s >= 1/3600 is plenty
local ZADD_CHUNK = 500  -- leases per ZADD (unpack has a limit on values)

-- Checks every operation before the first write.
local function parse()
  local ops, i = {}, 1
  while i <= #ARGV do
    local kind, instance = ARGV[i], ARGV[i + 1]
    if type(instance) ~= 'string' or not string.find(instance, '^[A-Za-z0-9._:-]+ [^ ]+$') then
      abort('invalid_argument', 'instance (operation ' .. fmt(#ops + 1) .. '): expected "<name> <url>"')
    end
    local op = { kind = kind, instance = instance }
    if kind == 'a' then
      op.want = int_arg(i + 2, 'want', 0, MAX_WANT)
      op.lease_ms = int_arg(i + 3, 'lease_ms', 1, MAX_LEASE_MS)
      op.concurrency = int_arg(i + 4, 'concurrency', 1, MAX_WANT)
      op.interval = int_arg(i + 5, 'interval_us', 0, MAX_INTERVAL_US)
      i = i + 6
    elseif kind == 's' then
      op.lease = ARGV[i + 2] or ''
      op.used = int_arg(i + 3, 'used', 0, 1) == 1
      op.ok = int_arg(i + 4, 'ok', 0, 1) == 1
      op.at = int_arg(i + 5, 'at_ms', 0, MAX_NOW)
      op.error = string.sub(ARGV[i + 6] or '', 1, MAX_ERROR)
      op.interval = int_arg(i + 7, 'interval_us', 0, MAX_INTERVAL_US)
      i = i + 8
    elseif kind == 'f' or kind == 'x' then
      i = i + 2
    else
      abort('invalid_argument', 'operation ' .. fmt(#ops + 1) .. ': a, s, f or x')
    end
    ops[#ops + 1] = op
  end
  return ops
end

local function acquire(op, now_ms, now_us)
  local kl, kf = kpl(op.instance), kpf(op.instance)
  redis.call('ZREMRANGEBYSCORE', kl, '-inf', fmt(now_ms))
  local rec = redis.call('HGET', K_SUBS, op.instance)
  if not rec or sub_lapsed(rec, now_ms) then return { 0 } end
  local held = redis.call('ZCARD', kl)
  local n = math.min(op.want, math.max(0, op.concurrency - held))
  local wait = 0
  if n > 0 and op.interval > 0 then
    local tat = tonumber(redis.call('HGET', kf, 'tat_us') or '0')
    local t = math.max(tat, now_us - math.max(0, 1000 - op.interval))
    local k = 0
    while k < n and t <= now_us do
      k = k + 1
      t = t + op.interval
    end
    if k < n then wait = math.max(1, math.ceil((t - now_us) / 1000)) end
    if k > 0 then redis.call('HSET', kf, 'tat_us', fmt(t)) end
    n = k
  end
  local out = { wait }
  if n == 0 then return out end
  local last = redis.call('INCRBY', K_PUSH_SEQ, n)
  local expiry = fmt(now_ms + op.lease_ms)
  local args = {}
  for lease = last - n + 1, last do
    local name = fmt(lease)
    out[#out + 1] = name
    args[#args + 1] = expiry
    args[#args + 1] = name
    if #args >= 2 * ZADD_CHUNK or lease == last then
      redis.call('ZADD', kl, unpack(args))
      args = {}
    end
  end
  local latest = redis.call('ZRANGE', kl, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', kl, fmt(tonumber(latest[2])))
  return out
end

local function settle(op, now_ms)
  local removed = redis.call('ZREM', kpl(op.instance), op.lease)
  local kf = kpf(op.instance)
  if not op.used then
    if removed == 1 and op.interval > 0 then
      local tat = redis.call('HGET', kf, 'tat_us')
      if tat then redis.call('HSET', kf, 'tat_us', fmt(tonumber(tat) - op.interval)) end
    end
    return 1
  end
  -- The figures of an instance deleted meanwhile are not brought back.
  if redis.call('HEXISTS', K_SUBS, op.instance) == 0 then return 1 end
  local at = op.at
  if at == 0 then at = now_ms end
  if op.ok then
    redis.call('HINCRBY', kf, 'delivered', 1)
    redis.call('HSET', kf, 'last_success_ms', fmt(at))
  else
    redis.call('HINCRBY', kf, 'failed', 1)
    redis.call('HSET', kf, 'last_error_ms', fmt(at), 'last_error', op.error)
  end
  return 1
end

local function figures(op, now_ms)
  local in_flight = redis.call('ZCOUNT', kpl(op.instance), '(' .. fmt(now_ms), '+inf')
  local f = redis.call('HMGET', kpf(op.instance), 'delivered', 'failed', 'last_success_ms',
                       'last_error_ms', 'last_error')
  return { in_flight, tonumber(f[1] or '0'), tonumber(f[2] or '0'), tonumber(f[3] or '0'),
           tonumber(f[4] or '0'), f[5] or '' }
end

local function main()
  local ops = parse()
  local now_ms, now_us = redis_time()
  local out = {}
  for _, op in ipairs(ops) do
    if op.kind == 'a' then
      out[#out + 1] = acquire(op, now_ms, now_us)
    elseif op.kind == 's' then
      out[#out + 1] = settle(op, now_ms)
    elseif op.kind == 'f' then
      out[#out + 1] = figures(op, now_ms)
    else
      redis.call('DEL', kpl(op.instance), kpf(op.instance))
      out[#out + 1] = 1
    end
  end
  return out
end

return run(main)
