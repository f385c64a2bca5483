-- create_run: insert the run unless its id exists.
-- KEYS[1] run key. ARGV: base, run_id, then field/value pairs (absent = None).
-- Returns 1 if inserted, else the stored hash as a flat list.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('HGETALL', KEYS[1])
end
local id = ARGV[2]
local run = {}
for i = 3, #ARGV, 2 do
  run[ARGV[i]] = ARGV[i + 1]
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
local created = run.created_at_ms
-- workflow, parent, fork and queue never change: indexed once, here
redis.call('ZADD', B .. 'runs', created, id)
redis.call('ZADD', B .. 'wf:' .. run.workflow, created, id)
if run.parent_id then
  redis.call('ZADD', B .. 'parent:' .. run.parent_id, created, id)
end
if run.forked_from then
  redis.call('ZADD', B .. 'forks:' .. run.forked_from, created, id)
end
if run.queue then
  redis.call('ZADD', B .. 'queue:' .. run.queue, created, id)
end
refile(id, run, nil)
if run.status == 'queued' then
  notify(id)
end
return 1
