-- archive_snapshots: swap a thread's older snapshots for its archive stub, and
-- delete the chunks among the candidates no remaining snapshot references.
-- KEYS[1] the thread's stub (a hash), KEYS[2] the thread stubs zset.
-- ARGV: base, the key of the stub it replaces ('' for none), the new stub's key,
-- its packed form, thread_id, n, then n (namespace, checkpoint_id) pairs, then the
-- candidate chunk hashes. Returns 1, or 0 (changing nothing) unless the stub is
-- the one it replaces and every snapshot named exists.
local thread = ARGV[5]
local n = tonumber(ARGV[6])
if (redis.call('HGET', KEYS[1], 'key') or '') ~= ARGV[2] then
  return 0
end
for i = 0, n - 1 do
  local records = B .. 'cp:' .. thread_suffix(thread, ARGV[7 + 2 * i])
  if redis.call('HEXISTS', records, ARGV[8 + 2 * i]) == 0 then
    return 0
  end
end
for i = 0, n - 1 do
  local suffix = thread_suffix(thread, ARGV[7 + 2 * i])
  local records, checkpoint = B .. 'cp:' .. suffix, ARGV[8 + 2 * i]
  for _, ref in ipairs(snapshot_refs(redis.call('HGET', records, checkpoint))) do
    decref(ref)
  end
  redis.call('HDEL', records, checkpoint)
  redis.call('ZREM', B .. 'cps:' .. suffix, checkpoint)
end
for i = 7 + 2 * n, #ARGV do
  if redis.call('HEXISTS', B .. 'chunkrefs', ARGV[i]) == 0 then
    redis.call('HDEL', B .. 'chunks', ARGV[i])
    redis.call('SREM', B .. 'orphans', ARGV[i])
  end
end
redis.call('HSET', KEYS[1], 'key', ARGV[3], 'stub', ARGV[4])
redis.call('ZADD', KEYS[2], 0, thread)
return 1
