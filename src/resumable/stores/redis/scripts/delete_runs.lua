-- delete_runs: delete terminal runs with their journals, inputs, feeds, index
-- entries and the step cache entries naming their rows.
-- KEYS[1] runs. ARGV: base, run_id...
-- Returns {steps, inputs, payload bytes, deleted run_id...}; the bytes are what the
-- SQL stores count: run input and output, step output (item 3) and usage (item 7),
-- input value (item 0).
local result = {0, 0, 0}
for i = 2, #ARGV do
  local id = ARGV[i]
  local run = load_run(id)
  if run and TERMINAL[run.status] then
    local key = run_key(id)
    local links = redis.call('HMGET', key, 'parent_id', 'forked_from')
    local steps, inputs = B .. 'steps:' .. id, B .. 'inputs:' .. id
    result[1] = result[1] + redis.call('HLEN', steps)
    result[2] = result[2] + redis.call('HLEN', inputs)
    local size = redis.call('HSTRLEN', key, 'input') + redis.call('HSTRLEN', key, 'output')
    for _, record in ipairs(redis.call('HVALS', steps)) do
      size = size + packed_len(record, 3) + packed_len(record, 7)
    end
    for _, record in ipairs(redis.call('HVALS', inputs)) do
      size = size + packed_len(record, 0)
    end
    result[3] = result[3] + size
    redis.call('DEL', key, steps, inputs, B .. 'archived:' .. id, B .. 'feed:' .. id)
    -- the step cache entries naming its rows (a key a later run took over stays)
    local cached = B .. 'stepcache:run:' .. id
    for _, field in ipairs(redis.call('SMEMBERS', cached)) do
      local entry = redis.call('HGET', B .. 'stepcache', field)
      if entry and packed_item(entry, 2) == id then
        redis.call('HDEL', B .. 'stepcache', field)
      end
    end
    redis.call('DEL', cached)
    redis.call('ZREM', B .. 'archived', id)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', B .. 'st:' .. run.status, id)
    count_run(run.status, run.queue, -1)
    redis.call('ZREM', B .. 'wf:' .. run.workflow, id)
    redis.call('ZREM', B .. 'rdy:' .. run.workflow, id)
    redis.call('ZREM', B .. 'timers', id)
    if links[1] then
      redis.call('ZREM', B .. 'parent:' .. links[1], id)
    end
    if links[2] then
      redis.call('ZREM', B .. 'forks:' .. links[2], id)
    end
    if run.queue then
      redis.call('ZREM', B .. 'queue:' .. run.queue, id)
      redis.call('ZREM', B .. 'qactive:' .. run.queue, id)
    end
    result[#result + 1] = id
  end
end
return result
