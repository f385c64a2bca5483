-- renew_lease: extend the lease if `fence` is still current.
-- KEYS[1] run key. ARGV: base, run_id, fence, expires_at_ms. Returns 1, or 0 if fenced out.
local id = ARGV[2]
local run = load_run(id)
if not run or run.fence ~= ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], 'lease_expires_at_ms', ARGV[4])
run.lease_expires_at_ms = ARGV[4]
refile(id, run, run.status)
return 1
