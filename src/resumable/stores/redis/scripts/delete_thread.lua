-- delete_thread: delete every snapshot of a thread, releasing its chunk references.
-- KEYS[1] nss, KEYS[2] threads. ARGV: base, thread_id. Returns how many snapshots were deleted.
-- The thread's archive stub goes too (archive_snapshots.lua).
local thread = ARGV[2]
local count = 0
for _, namespace in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local suffix = thread_suffix(thread, namespace)
  local records = B .. 'cp:' .. suffix
  for _, record in ipairs(redis.call('HVALS', records)) do
    count = count + 1
    for _, ref in ipairs(snapshot_refs(record)) do
      decref(ref)
    end
  end
  redis.call('DEL', records, B .. 'cps:' .. suffix)
end
redis.call('DEL', KEYS[1], B .. 'tstub:' .. thread)
redis.call('ZREM', KEYS[2], thread)
redis.call('ZREM', B .. 'tstubs', thread)
return count
