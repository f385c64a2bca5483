-- delete_snapshots: delete some snapshots of a thread, releasing their chunk references.
-- KEYS[1] nss, KEYS[2] threads. ARGV: base, thread_id, then (namespace, checkpoint id)
-- pairs. Returns how many snapshots were deleted.
local thread = ARGV[2]
local count = 0
local time = tonumber(redis.call('ZSCORE', KEYS[2], thread) or '0')
local lowered = false
for i = 3, #ARGV, 2 do
  local suffix = thread_suffix(thread, ARGV[i])
  local records = B .. 'cp:' .. suffix
  local record = redis.call('HGET', records, ARGV[i + 1])
  if record then
    count = count + 1
    for _, ref in ipairs(snapshot_refs(record)) do
      decref(ref)
    end
    lowered = lowered or snapshot_created(record) >= time
    redis.call('HDEL', records, ARGV[i + 1])
    redis.call('ZREM', B .. 'cps:' .. suffix, ARGV[i + 1])
  end
end
settle_thread(KEYS[1], KEYS[2], thread, lowered)
return count
