#!lua flags=no-writes
-- heads: read-only; the sort keys of the best ready (or oldest buried) jobs
-- of some topics in one bucket, for the caller's merge across buckets
-- (docs/redis-store.md, "Reserving across buckets"). One call serves several
-- groups (the reserves of one round that want this bucket's heads, each with
-- its own topics), so a round costs one heads per bucket however many groups
-- it has. May run on a replica (EVALSHA_RO). Changes nothing, so it does not
-- settle the bucket: due jobs not promoted yet are not seen (next_due_ms <=
-- now_ms tells the caller).
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  "ready" or "buried"
-- ARGV[3]  G, the number of groups (1..1000)
-- then per group:
--          m, 1..1000: how many keys at most
--          k, 1..100: how many topics follow
--          k topics (ready: paused ones are skipped; repeats are ignored)
--          The m of all groups sum to at most 1000, the k to at most 1000.
-- Reply    next_due_ms (-1: none), then per group in the order given: n, the
--          number of its keys (0..m), then its n keys, best first:
--          ready: 3 integers each (priority, run_at_ms, seq);
--          buried: 1 integer each (seq)
-- Errors   invalid_argument naming the argument (state, groups, m, topics).
--!include lib.lua

local function main()
  read_now()
  local state = ARGV[2]
  if state ~= 'ready' and state ~= 'buried' then
    abort('invalid_argument', 'state: ready or buried')
  end
  local groups = read_groups(3, 'm')
  local paused = {}  -- topic -> paused now: read once however many groups name it
  local function open_now(t)
    if paused[t] == nil then paused[t] = paused_now(t) end
    return not paused[t]
  end
  local out = { earliest() or -1 }
  for _, g in ipairs(groups) do
    local m, keys = g.n, {}
    for _, t in ipairs(g.topics) do
      if state == 'buried' then
        local l = redis.call('ZRANGE', kb(t), 0, m - 1, 'WITHSCORES')
        for i = 2, #l, 2 do keys[#keys + 1] = { tonumber(l[i]) } end  -- the scores: seq
      elseif open_now(t) then
        local l = redis.call('ZRANGE', kr(t), 0, m - 1, 'WITHSCORES')
        for i = 1, #l, 2 do
          local run_at, seq = struct.unpack('>I6I7', l[i])
          keys[#keys + 1] = { tonumber(l[i + 1]), run_at, seq }
        end
      end
    end
    table.sort(keys, function(a, b)
      for i = 1, #a do
        if a[i] ~= b[i] then return a[i] < b[i] end
      end
      return false
    end)
    local n = math.min(m, #keys)
    out[#out + 1] = n
    for i = 1, n do
      for _, v in ipairs(keys[i]) do out[#out + 1] = v end
    end
  end
  return out
end

return run(main)
