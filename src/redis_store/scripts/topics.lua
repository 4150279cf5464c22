#!lua
-- topics: per-topic counts of one bucket; the caller sums them over buckets.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  optional topic: only that one (zeros if the bucket has none of it)
-- Reply    6 fields per topic with jobs or a pause in this bucket (or for
--          the one asked for): name, delayed, ready, reserved, buried,
--          paused_until_ms (0: not paused; -1: until resumed)
-- Errors   invalid_argument naming topic.
--
-- Settles the bucket first. Waiting reserves are not in Redis: each server
-- adds its own. Topics are listed in no particular order.
--!include lib.lua

local function main()
  read_now()
  local only = ARGV[2]
  if only ~= nil then check_topic(only, 'topic') end
  settle_bucket(SETTLE_LIMIT)
  commit()
  local names = {}
  if only ~= nil then
    names[1] = only
  else
    local seen = {}
    for _, key in ipairs({ K_TOPICS, K_PAUSED }) do
      for _, t in ipairs(redis.call('HKEYS', key)) do
        if not seen[t] then
          seen[t] = true
          names[#names + 1] = t
        end
      end
    end
  end
  local out = {}
  for _, t in ipairs(names) do
    local o = #out
    out[o + 1] = t
    out[o + 2] = redis.call('ZCARD', kd(t))
    out[o + 3] = redis.call('ZCARD', kr(t))
    out[o + 4] = tonumber(redis.call('HGET', K_RESERVING, t) or '0')
    out[o + 5] = redis.call('ZCARD', kb(t))
    out[o + 6] = tonumber(redis.call('HGET', K_PAUSED, t) or '0')
  end
  return out
end

return run(main)
