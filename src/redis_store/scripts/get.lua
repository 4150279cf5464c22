#!lua
-- get: one job and its state.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  id
-- Reply    the job info array (14 fields): id, topic, state, body, priority,
--          ttr_ms, max_attempts, attempts, created_at_ms, run_at_ms,
--          reserved_until_ms (0 unless reserved), receipt ("" unless
--          reserved), last_error, seq
-- Errors   not_found.
--
-- Acts on the time for this job first (a due job reads as ready, a run-out
-- reservation as ready or buried), so get is a writing script.
--!include lib.lua

local function main()
  read_now()
  local id = check_id(ARGV[2], 'id')
  local j = load(id)
  if j == nil then abort('not_found', quote(id) .. ' does not exist') end
  if settle_job(j) then save(j) end
  commit()
  return info(j)
end

return run(main)
