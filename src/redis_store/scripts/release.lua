#!lua
-- release: gives a reserved job back, due again after delay_ms, keeping
-- `error` as its last_error; buried instead when its attempts are used up
-- (max_attempts > 0 and attempts >= max_attempts, whatever the delay).
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  id
-- ARGV[3]  receipt (as finish takes it: "" skips the check)
-- ARGV[4]  delay_ms, 0..100 years (0: ready at once, behind jobs due earlier)
-- ARGV[5]  error text ("" clears last_error); at most 1024 bytes are kept
-- Reply    the job's new state: "ready" | "delayed" | "buried"
-- Errors   not_found, not_reserved, stale_receipt (as finish),
--          invalid_argument naming delay_ms.
--
-- run_at becomes now_ms + delay_ms, so the job takes its place in line by
-- that time. Counters: released (also when it is buried), buried_total.
--!include lib.lua

local function main()
  read_now()
  local id = check_id(ARGV[2], 'id')
  local receipt = ARGV[3] or ''
  local delay = int_arg(4, 'delay_ms', 0, MAX_DELAY)
  local e = ARGV[5] or ''
  local j = load(id)
  if j == nil then abort('not_found', quote(id) .. ' does not exist') end
  if settle_job(j) then save(j) end
  local code, msg = check_reservation(j, receipt)
  if code then
    commit()
    abort(code, msg)
  end
  measure_due()
  detach(j)
  count('released')
  end_attempt(j, NOW + delay, e)
  save(j)
  commit()
  return STATE_NAMES[j.state]
end

return run(main)
