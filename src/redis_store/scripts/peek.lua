#!lua
-- peek: the next job of a topic in one bucket in a state, unchanged.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  topic
-- ARGV[3]  state: "ready" (the next to be reserved, paused or not),
--          "delayed" (the next to fall due: run_at, then seq) or "buried"
--          (the next to be kicked: oldest seq)
-- Reply    the job info array (as get), or nil when the bucket has none
-- Errors   invalid_argument naming topic or state (also for "reserved").
--
-- Settles the bucket first. The caller asks every bucket and keeps the best
-- by the info's priority, run_at_ms and seq (ready), run_at_ms and seq
-- (delayed) or seq (buried); not_found when no bucket has one.
--!include lib.lua

local function main()
  read_now()
  local topic = check_topic(ARGV[2], 'topic')
  local state = ARGV[3]
  if state ~= 'ready' and state ~= 'delayed' and state ~= 'buried' then
    abort('invalid_argument', 'state: peek takes ready, delayed or buried')
  end
  settle_bucket(SETTLE_LIMIT)
  local id
  if state == 'ready' then
    local m = redis.call('ZRANGE', kr(topic), 0, 0)[1]
    if m then id = id_of_ready(m) end
  elseif state == 'delayed' then
    local m = redis.call('ZRANGE', kd(topic), 0, 0)[1]
    if m then id = id_of_delayed(m) end
  else
    id = redis.call('ZRANGE', kb(topic), 0, 0)[1]
  end
  commit()
  if not id then return false end
  local j = load(id)
  if j == nil then return false end
  return info(j)
end

return run(main)
