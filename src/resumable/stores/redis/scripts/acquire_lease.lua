-- acquire_lease: take the run's lease, incrementing its fence.
-- ARGV: base, run_id, owner, now_ms, expires_at_ms, has_take_over ('1'/'0'), take_over.
-- Returns {new fence (a string), previous owner it was taken from (nil: nobody)},
-- 0 if another live owner holds it, -1 if missing.
local id, owner, now = ARGV[2], ARGV[3], ARGV[4]
local take_over = nil
if ARGV[6] == '1' then
  take_over = ARGV[7]
end
local run = load_run(id)
if not run then
  return -1
end
if not can_acquire(run, owner, tonumber(now), take_over) then
  return 0
end
local fence, from = lease(id, run, owner, now, ARGV[5])
return {fence, from}
