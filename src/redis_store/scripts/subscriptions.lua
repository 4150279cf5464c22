#!lua
-- subscriptions: the push subscriptions of a deployment, one hash under
-- bucket 0's tag (docs/redis-store.md, "Subscriptions"): put (add or renew),
-- delete, list. An instance is the field "<name> <url>" (a name has no
-- space, a url none either); its value the record, whose head (version,
-- created_ms, renewed_ms, expires_ms, ttl_ms) this script writes and whose
-- rest is the caller's.
--
-- KEYS[1]  bucket 0's tag "{<prefix>:0}"
-- ARGV[1]  the operation, then its arguments:
--   put <instance> <record>  adds the instance, or renews it (created_ms
--            kept); the record as the caller encoded it, head times 0.
--            Reply: the record as stored.
--   delete <name> [<url>]    removes the instance, or every instance of
--            name when url is "" or absent. Reply: how many live ones went.
--   list [<name>]            the live instances' records, of every name
--            when name is "" or absent, unordered (the caller sorts).
-- Errors   invalid_argument (operation, instance, record), nothing changed.
--
-- Time is Redis's (TIME), not the caller's: every server compares the same
-- expires_ms. Lapsed instances (expires_ms <= now) count as absent: put
-- starts them anew, delete does not count them, list leaves them out; every
-- operation that meets one removes it, with its ledger keys (push_ledger.lua).
--!include lib.lua

local MAX_TTL = 604800000  -- 7 days, as delayq/subscription.h

local function forget(instance)
  redis.call('HDEL', K_SUBS, instance)
  redis.call('DEL', kpl(instance), kpf(instance))
end

local function check_name(name)
  if type(name) ~= 'string' or #name == 0 or #name > 100 or
      not string.find(name, '^[A-Za-z0-9._:-]+$') then
    abort('invalid_argument', 'name: 1-100 bytes of [A-Za-z0-9._:-]')
  end
end

local function put(now)
  local instance, rec = ARGV[2], ARGV[3]
  local name = type(instance) == 'string' and string.match(instance, '^([^ ]+) [^ ]+$')
  if not name then abort('invalid_argument', 'instance: expected "<name> <url>"') end
  check_name(name)
  if type(rec) ~= 'string' or #rec < SUB_HEAD_BYTES then
    abort('invalid_argument', 'record: shorter than its head')
  end
  local version, _, _, _, ttl = struct.unpack(SUB_HEAD, rec)
  if version ~= SUB_VERSION then
    abort('invalid_argument', 'record: version ' .. fmt(version) .. ', these scripts write '
      .. fmt(SUB_VERSION))
  end
  if ttl > MAX_TTL then abort('invalid_argument', 'ttl_ms: at most 604800000 (7 days)') end
  local created = now
  local old = redis.call('HGET', K_SUBS, instance)
  if old then
    if sub_lapsed(old, now) then
      redis.call('DEL', kpl(instance), kpf(instance))  -- a new instance: a new ledger
    else
      created = struct.unpack('>I6', old, 2)
    end
  end
  local expires = 0
  if ttl > 0 then expires = now + ttl end
  local stored = struct.pack(SUB_HEAD, SUB_VERSION, created, now, expires, ttl)
    .. string.sub(rec, SUB_HEAD_BYTES + 1)
  redis.call('HSET', K_SUBS, instance, stored)
  return stored
end

local function delete(now)
  local name, url = ARGV[2], ARGV[3] or ''
  check_name(name)
  local n = 0
  if url ~= '' then
    local instance = name .. ' ' .. url
    local old = redis.call('HGET', K_SUBS, instance)
    if old then
      if not sub_lapsed(old, now) then n = 1 end
      forget(instance)
    end
    return n
  end
  local p = name .. ' '
  local all = redis.call('HGETALL', K_SUBS)
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, #p) == p then
      if not sub_lapsed(all[i + 1], now) then n = n + 1 end
      forget(all[i])
    end
  end
  return n
end

local function list(now)
  local name = ARGV[2] or ''
  if name ~= '' then check_name(name) end
  local p = name .. ' '
  local out = {}
  local all = redis.call('HGETALL', K_SUBS)
  for i = 1, #all, 2 do
    local instance, rec = all[i], all[i + 1]
    if sub_lapsed(rec, now) then
      forget(instance)
    elseif name == '' or string.sub(instance, 1, #p) == p then
      out[#out + 1] = rec
    end
  end
  return out
end

local OPS = { put = put, delete = delete, list = list }

local function main()
  local op = OPS[ARGV[1]]
  if not op then abort('invalid_argument', 'operation: put, delete or list') end
  local now = redis_time()
  return op(now)
end

return run(main)
