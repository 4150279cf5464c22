#!lua
-- bury: sets a reserved job aside until kicked, with `reason` as its
-- last_error.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  id
-- ARGV[3]  receipt (as finish takes it: "" skips the check)
-- ARGV[4]  reason ("" clears last_error); at most 1024 bytes are kept
-- Reply    "OK"
-- Errors   not_found, not_reserved, stale_receipt (as finish).
--
-- Buried jobs of a topic are kicked oldest added first (by seq).
-- Counter: buried_total.
--!include lib.lua

local function main()
  read_now()
  local id = check_id(ARGV[2], 'id')
  local receipt = ARGV[3] or ''
  local reason = ARGV[4] or ''
  local j = load(id)
  if j == nil then abort('not_found', quote(id) .. ' does not exist') end
  if settle_job(j) then save(j) end
  local code, msg = check_reservation(j, receipt)
  if code then
    commit()
    abort(code, msg)
  end
  detach(j)
  set_error(j, reason)
  attach_buried(j)
  save(j)
  commit()
  return redis.status_reply('OK')
end

return run(main)
