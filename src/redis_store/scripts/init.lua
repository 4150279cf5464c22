#!lua
-- init: checks (or, on first use, writes) a bucket's format version and the
-- number of buckets of the deployment. Every server calls it for every
-- bucket when it opens the store, before any other script.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  format version the caller reads and writes (1)
-- ARGV[3]  number of buckets, 1..16384
-- Reply    "OK"
-- Errors   internal when the bucket holds another format (or this library
--          is another format than the caller's); invalid_argument when it
--          was created with another number of buckets (jobs would be looked
--          for in the wrong bucket) or its number is not below it.
--!include lib.lua

local function main()
  read_now()
  local format = int_arg(2, 'format', 1, 65535)
  local buckets = int_arg(3, 'buckets', 1, 16384)
  if format ~= FORMAT then
    abort('internal', 'format: the caller speaks format ' .. format .. ', these scripts '
      .. FORMAT)
  end
  if tonumber(BUCKET) >= buckets then
    abort('invalid_argument', 'buckets: bucket ' .. BUCKET .. ' of ' .. buckets)
  end
  local stored = redis.call('HMGET', K_META, 'format', 'buckets')
  if not stored[1] then
    redis.call('HSET', K_META, 'format', format, 'buckets', buckets)
    return redis.status_reply('OK')
  end
  if tonumber(stored[1]) ~= format then
    abort('internal', 'format: prefix ' .. PREFIX .. ' holds format ' .. stored[1]
      .. ' data; this delayq reads format ' .. format)
  end
  if tonumber(stored[2]) ~= buckets then
    abort('invalid_argument', 'buckets: prefix ' .. PREFIX .. ' was created with '
      .. tostring(stored[2]) .. ' buckets, not ' .. buckets)
  end
  return redis.status_reply('OK')
end

return run(main)
