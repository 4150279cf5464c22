#!lua
-- kick: makes one buried or delayed job ready now.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  id
-- Reply    "OK"
-- Errors   not_found; invalid_argument when the job is ready or reserved.
--
-- A buried job goes back to its place in line (run_at and seq kept); a
-- delayed job's run_at becomes now_ms. Counter: kicked.
--!include lib.lua

local function main()
  read_now()
  local id = check_id(ARGV[2], 'id')
  local j = load(id)
  if j == nil then abort('not_found', quote(id) .. ' does not exist') end
  if settle_job(j) then save(j) end
  if j.state ~= BURIED and j.state ~= DELAYED then
    commit()
    abort('invalid_argument', quote(id) .. ' is ' .. STATE_NAMES[j.state]
      .. '; only buried or delayed jobs can be kicked')
  end
  local was = j.state
  detach(j)
  if was == DELAYED then j.run_at = NOW end
  attach_ready(j)
  save(j)
  count('kicked')
  commit()
  return redis.status_reply('OK')
end

return run(main)
