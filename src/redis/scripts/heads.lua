#!lua flags=no-writes
-- heads: read-only; the sort keys of the best ready (or oldest buried) jobs
-- of some topics in one bucket, for the caller's merge across buckets
-- (docs/redis-store.md, "Reserving across buckets"). May run on a replica
-- (EVALSHA_RO). Changes nothing, so it does not settle the bucket: due jobs
-- not promoted yet are not seen (next_due_ms <= now_ms tells the caller).
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  "ready" or "buried"
-- ARGV[3]  m, 1..1000: how many keys at most
-- ARGV[4..] topics, 1..100 (ready: paused ones are skipped)
-- Reply    next_due_ms (-1: none), then up to m keys, best first:
--          ready: 3 integers each (priority, run_at_ms, seq);
--          buried: 1 integer each (seq)
-- Errors   invalid_argument naming the argument.
--!include lib.lua

local function main()
  read_now()
  local state = ARGV[2]
  if state ~= 'ready' and state ~= 'buried' then
    abort('invalid_argument', 'state: ready or buried')
  end
  local m = int_arg(3, 'm', 1, MAX_BATCH)
  if #ARGV - 3 < 1 or #ARGV - 3 > MAX_TOPICS then
    abort('invalid_argument', 'topics: give 1..' .. MAX_TOPICS .. ' topics')
  end
  local keys, seen = {}, {}
  for i = 4, #ARGV do
    local t = check_topic(ARGV[i], 'topics')
    if not seen[t] then
      seen[t] = true
      if state == 'buried' then
        local l = redis.call('ZRANGE', kb(t), 0, m - 1, 'WITHSCORES')
        for i2 = 2, #l, 2 do keys[#keys + 1] = { tonumber(l[i2]) } end  -- the scores: seq
      elseif not paused_now(t) then
        local l = redis.call('ZRANGE', kr(t), 0, m - 1, 'WITHSCORES')
        for i2 = 1, #l, 2 do
          local run_at, seq = struct.unpack('>I6I7', l[i2])
          keys[#keys + 1] = { tonumber(l[i2 + 1]), run_at, seq }
        end
      end
    end
  end
  table.sort(keys, function(a, b)
    for i = 1, #a do
      if a[i] ~= b[i] then return a[i] < b[i] end
    end
    return false
  end)
  local out = { earliest() or -1 }
  for i = 1, math.min(m, #keys) do
    for _, v in ipairs(keys[i]) do out[#out + 1] = v end
  end
  return out
end

return run(main)
