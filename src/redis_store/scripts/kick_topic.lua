#!lua
-- kick_topic: makes up to n buried jobs of a topic in one bucket ready,
-- oldest added first (by seq), each at its place in line.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  topic
-- ARGV[3]  n, 0..1000 (the caller loops for more)
-- Reply    integer: how many were kicked
-- Errors   invalid_argument naming topic or n.
--
-- Settles the bucket first (a TTR running out may bury a job). Across
-- buckets "oldest first" needs the caller's merge: docs/redis-store.md.
-- Counter: kicked.
--!include lib.lua

local function main()
  read_now()
  local topic = check_topic(ARGV[2], 'topic')
  local n = int_arg(3, 'n', 0, MAX_BATCH)
  settle_bucket(SETTLE_LIMIT)
  if n == 0 then
    commit()
    return 0
  end
  local popped = redis.call('ZPOPMIN', kb(topic), n)
  local ids = {}
  for i = 1, #popped, 2 do ids[#ids + 1] = popped[i] end
  if #ids == 0 then
    commit()
    return 0
  end
  local kicked = make_ready(topic, ids)
  count('kicked', kicked)
  commit()
  return kicked
end

return run(main)
