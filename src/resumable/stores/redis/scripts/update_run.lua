-- update_run: a status change by the lease holder; any status but running frees the lease.
-- KEYS[1] run key. ARGV: base, run_id, fence, status, now_ms, has_output, output,
-- wake_at_ms ('' = None), expires_at_ms ('' = keep). Returns 1, or 0 if fenced out.
local id, status = ARGV[2], ARGV[4]
local run = load_run(id)
if not run or run.fence ~= ARGV[3] then
  return 0
end
local old_status = run.status
run.status = status
redis.call('HSET', KEYS[1], 'status', status, 'updated_at_ms', ARGV[5])
if ARGV[6] == '1' then
  redis.call('HSET', KEYS[1], 'output', ARGV[7])
end
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], 'wake_at_ms', ARGV[8])
  run.wake_at_ms = ARGV[8]
else
  redis.call('HDEL', KEYS[1], 'wake_at_ms')
  run.wake_at_ms = nil
end
if ARGV[9] ~= '' then  -- '' keeps the TTL the run was given at start
  redis.call('HSET', KEYS[1], 'expires_at_ms', ARGV[9])
end
if status ~= 'running' then
  redis.call('HDEL', KEYS[1], 'lease_owner')
  redis.call('HSET', KEYS[1], 'lease_expires_at_ms', '0')
  run.lease_owner = nil
  run.lease_expires_at_ms = '0'
end
refile(id, run, old_status)
if status == 'queued' then
  notify(id)
end
return 1
