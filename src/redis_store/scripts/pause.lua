#!lua
-- pause: pauses or resumes a topic in one bucket. A pause must be written to
-- every bucket (reserve reads it there); the caller does that.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  topic
-- ARGV[3]  until_ms: -1 paused until resumed; 0 resume; > 0 paused until
--          that time (the caller passes now_ms + duration_ms; a time <= now_ms
--          resumes)
-- Reply    "OK"
-- Errors   invalid_argument naming topic or until_ms.
--
-- Jobs keep falling due while paused; peek still shows them. Resuming a
-- topic that has ready jobs publishes its wake-up; a timed pause is part of
-- the bucket's next due time, so a promote ends it when it runs out.
--!include lib.lua

local function main()
  read_now()
  local topic = check_topic(ARGV[2], 'topic')
  local until_ms = int_arg(3, 'until_ms', -1, MAX_RUN_AT)
  if until_ms > 0 and until_ms <= NOW then until_ms = 0 end
  if until_ms == 0 then
    if redis.call('HDEL', K_PAUSED, topic) == 1 then wake_if_ready(topic) end
  else
    measure_due()
    redis.call('HSET', K_PAUSED, topic, fmt(until_ms))
    if until_ms > 0 then added_due(until_ms) end
  end
  commit()
  return redis.status_reply('OK')
end

return run(main)
