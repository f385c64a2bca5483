-- cancel_run: mark a non-terminal run cancelled and fence out its executor.
-- KEYS[1] run key. ARGV: base, run_id, now_ms. Returns the hash as a flat list (empty if missing).
local id = ARGV[2]
local run = load_run(id)
if not run then
  return {}
end
if not TERMINAL[run.status] then
  local old_status = run.status
  run.status = 'cancelled'
  run.lease_owner = nil
  run.lease_expires_at_ms = '0'
  run.wake_at_ms = nil
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'lease_expires_at_ms', '0',
    'fence', int(tonumber(run.fence) + 1), 'updated_at_ms', ARGV[3])
  redis.call('HDEL', KEYS[1], 'lease_owner', 'wake_at_ms')
  refile(id, run, old_status)
  notify(id)
end
return redis.call('HGETALL', KEYS[1])
