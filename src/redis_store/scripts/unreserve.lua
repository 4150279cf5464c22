#!lua
-- unreserve: gives back a delivery that never reached its client (the
-- server's connection to it closed before the reply was written): the job is
-- ready again at once, in its old place in line (run_at kept), and the
-- delivery's attempt is not counted. last_error is kept.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  id
-- ARGV[3]  receipt (as finish takes it; the caller never sends "")
-- ARGV[4]  optional: "surplus" when the delivery never left the caller (the
--          jobs of a batch past its byte budget): it is not counted in
--          reserves either, which counts jobs handed out
-- Reply    the job's new state: "ready"
-- Errors   not_found, not_reserved, stale_receipt (as finish).
--
-- Counter: reserves, lowered for a surplus delivery only; any other was
-- handed out (reserves) and is not released. The delivery is counted as given back (the `given` entry), so
-- the job's next delivery gets a new receipt: this one stays stale for good.
--!include lib.lua

local function main()
  read_now()
  local id = check_id(ARGV[2], 'id')
  local receipt = ARGV[3] or ''
  local surplus = ARGV[4] == 'surplus'
  local j = load(id)
  if j == nil then abort('not_found', quote(id) .. ' does not exist') end
  if settle_job(j) then save(j) end
  local code, msg = check_reservation(j, receipt)
  if code then
    commit()
    abort(code, msg)
  end
  detach(j)
  set_given(j, given_of(j) + 1)
  if j.attempts > 0 then j.attempts = j.attempts - 1 end
  attach_ready(j)
  save(j)
  if surplus then count('reserves', -1) end
  commit()
  return STATE_NAMES[j.state]
end

return run(main)
