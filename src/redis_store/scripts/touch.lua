#!lua
-- touch: extends reservations of one bucket to a full TTR from now_ms: the
-- job's ttr_ms, or the reserve's own TTR that made the reservation (rttr).
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2..] 2 per job, 1..1000 jobs: id, receipt (as finish takes it)
-- Reply    one status per job, in order: "ok" | "not_found" | "not_reserved <state>"
--          | "stale_receipt" (as finish)
-- Errors   invalid_argument for a malformed batch (nothing changed).
--
-- The receipt stays the same; the deadline becomes now_ms + that TTR. A
-- reservation whose deadline <= now_ms has already run out (stale).
--!include lib.lua

local function main()
  read_now()
  local n = (#ARGV - 1) / 2
  if n < 1 or n > MAX_BATCH or n ~= math.floor(n) then
    abort('invalid_argument', 'jobs: expected 1..' .. MAX_BATCH .. ' pairs of id, receipt')
  end
  for k = 1, n do check_id(ARGV[2 * k], 'id') end
  local out = {}
  for k = 1, n do
    local j = load(ARGV[2 * k])
    if j == nil then
      out[k] = 'not_found'
    else
      if settle_job(j) then save(j) end
      local code, _, status = check_reservation(j, ARGV[2 * k + 1])
      if code then
        out[k] = status
      else
        redis.call('ZADD', K_RESERVED, 'XX', NOW + reservation_ttr(j), j.id)
        out[k] = 'ok'
      end
    end
  end
  commit()
  return out
end

return run(main)
