-- send_input: record an input unless its key holds one; wake the run if it waits.
-- KEYS[1] run key, KEYS[2] inputs key. ARGV: base, run_id, key, packed value, sent_at_ms.
-- Returns 1 if recorded, 0 if the key already held a value, -1 if the run is missing.
local id = ARGV[2]
local run = load_run(id)
if not run then
  return -1
end
if redis.call('HSETNX', KEYS[2], ARGV[3], ARGV[4]) == 0 then
  return 0
end
if run.status == 'waiting' then
  run.status = 'queued'
  run.wake_at_ms = nil
  redis.call('HSET', KEYS[1], 'status', 'queued', 'updated_at_ms', ARGV[5])
  redis.call('HDEL', KEYS[1], 'wake_at_ms')
  refile(id, run, 'waiting')
  notify(id)
end
return 1
