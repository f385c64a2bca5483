-- delete_snapshots: delete some snapshots of a thread, releasing their chunk references.
-- KEYS[1] nss, KEYS[2] threads. ARGV: base, thread_id, then (namespace, checkpoint id)
-- pairs. Returns how many snapshots were deleted.
local thread = ARGV[2]
local count = 0
for i = 3, #ARGV, 2 do
  local suffix = thread_suffix(thread, ARGV[i])
  local records = B .. 'cp:' .. suffix
  local record = redis.call('HGET', records, ARGV[i + 1])
  if record then
    count = count + 1
    for _, ref in ipairs(snapshot_refs(record)) do
      decref(ref)
    end
    redis.call('HDEL', records, ARGV[i + 1])
    redis.call('ZREM', B .. 'cps:' .. suffix, ARGV[i + 1])
  end
end
for _, namespace in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('HLEN', B .. 'cp:' .. thread_suffix(thread, namespace)) == 0 then
    redis.call('SREM', KEYS[1], namespace)
  end
end
-- the thread's time stays its newest save's; a thread left empty is no longer listed
if redis.call('SCARD', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], thread)
end
return count
