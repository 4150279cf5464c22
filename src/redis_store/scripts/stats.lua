#!lua
-- stats: counts and counters of one bucket; the caller sums them over
-- buckets (and takes the number of topics from topics.lua).
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- Reply    14 integers: jobs, delayed, ready, reserved, buried, then the
--          counters added, replaced, reserves, finished, deleted, released,
--          timed_out, buried_total, kicked
--
-- Settles the bucket first. The counters count since the bucket was first
-- used under this prefix (by every server sharing it), not since a start.
--!include lib.lua

local COUNTERS = { 'added', 'replaced', 'reserves', 'finished', 'deleted', 'released',
                   'timed_out', 'buried_total', 'kicked' }

local function main()
  read_now()
  settle_bucket(SETTLE_LIMIT)
  commit()
  local delayed, ready, buried = 0, 0, 0
  for _, t in ipairs(redis.call('HKEYS', K_TOPICS)) do
    delayed = delayed + redis.call('ZCARD', kd(t))
    ready = ready + redis.call('ZCARD', kr(t))
    buried = buried + redis.call('ZCARD', kb(t))
  end
  local out = { redis.call('HLEN', K_JOBS), delayed, ready, redis.call('ZCARD', K_RESERVED),
                buried }
  local c = redis.call('HMGET', K_META, unpack(COUNTERS))
  for i = 1, #COUNTERS do out[#out + 1] = tonumber(c[i] or '0') end
  return out
end

return run(main)
