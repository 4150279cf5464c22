#!lua
-- promote: acts on the time for one bucket: moves up to `limit` due delayed
-- jobs to ready (earliest run_at first), times out up to `limit` expired
-- reservations (back to ready at their place in line, or buried when their
-- attempts are used up) and ends pauses whose time has come. Wake-ups are
-- published for topics whose ready set was empty.
--
-- KEYS[1]  the bucket tag "{<prefix>:<bucket>}"
-- ARGV[1]  now_ms
-- ARGV[2]  limit, 1..1000
-- Reply    3 integers: promoted, timed_out, next_due_ms (the bucket's
--          earliest delayed run_at, TTR deadline or pause end; -1: none).
--          next_due_ms <= now_ms means work is left (a limit was reached):
--          call again at once. Otherwise sleep until next_due_ms or a wake
--          message, whichever comes first.
-- Errors   invalid_argument naming limit.
--
-- Idempotent: several servers may promote the same bucket; the first moves
-- the jobs, the others find nothing due. Counters: timed_out, buried_total.
--!include lib.lua

local function main()
  read_now()
  local limit = int_arg(2, 'limit', 1, MAX_BATCH)
  local promoted, timed_out = settle_bucket(limit)
  commit()
  return { promoted, timed_out, earliest() or -1 }
end

return run(main)
