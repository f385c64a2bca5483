-- reopen_run: make a failed run queued again (its recorded failure stays until it ends).
-- KEYS[1] run key. ARGV: base, run_id, now_ms. Returns 1, 0 if not failed, -1 if missing.
local id = ARGV[2]
local run = load_run(id)
if not run then
  return -1
end
if run.status ~= 'failed' then
  return 0
end
run.status = 'queued'
redis.call('HSET', KEYS[1], 'status', 'queued', 'updated_at_ms', ARGV[3])
refile(id, run, 'failed')
notify(id)
return 1
