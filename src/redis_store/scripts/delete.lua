#!lua
-- delete: removes a batch of jobs of one bucket, each in any state.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2..] ids, 1..1000
-- Reply    one status per id, in order: "ok" | "not_found"
-- Errors   invalid_argument for a malformed batch (nothing changed).
--
-- Counter: deleted (a reservation that had run out is counted timed_out
-- first, as the engine would).
--!include lib.lua

local function main()
  read_now()
  local n = #ARGV - 1
  if n < 1 or n > MAX_BATCH then abort('invalid_argument', 'ids: give 1..' .. MAX_BATCH) end
  for k = 1, n do check_id(ARGV[k + 1], 'id') end
  local out = {}
  for k = 1, n do
    local j = load(ARGV[k + 1])
    if j == nil then
      out[k] = 'not_found'
    else
      settle_job(j)
      detach(j)
      redis.call('HDEL', K_JOBS, j.id)
      forget_given({ j.id })
      hincr(K_TOPICS, j.topic, -1)
      count('deleted')
      out[k] = 'ok'
    end
  end
  commit()
  return out
end

return run(main)
