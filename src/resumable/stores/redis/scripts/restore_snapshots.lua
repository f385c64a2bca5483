-- restore_snapshots: put a thread's archived snapshots and chunks back and delete
-- its stub. KEYS[1] the thread's stub, KEYS[2] the thread stubs zset, KEYS[3] the
-- threads zset, KEYS[4] the thread's namespaces set. ARGV: base, the stub's key,
-- thread_id, n chunks, then n (hash, data) pairs, then per snapshot: namespace,
-- checkpoint_id, packed record, created_at_ms, n refs, the refs. A snapshot that
-- exists keeps its record. Returns 1, or 0 (changing nothing) unless the stub
-- still names that key.
local thread = ARGV[3]
if redis.call('HGET', KEYS[1], 'key') ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], thread)
local i = 5
for _ = 1, tonumber(ARGV[4]) do
  put_chunk(ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  local namespace, checkpoint = ARGV[i], ARGV[i + 1]
  local refs = tonumber(ARGV[i + 4])
  local suffix = thread_suffix(thread, namespace)
  if redis.call('HSETNX', B .. 'cp:' .. suffix, checkpoint, ARGV[i + 2]) == 1 then
    for r = i + 5, i + 4 + refs do
      incref(ARGV[r])
    end
    redis.call('ZADD', B .. 'cps:' .. suffix, 0, checkpoint)
    redis.call('SADD', KEYS[4], namespace)
    touch_thread(KEYS[3], thread, ARGV[i + 3])
  end
  i = i + 5 + refs
end
return 1
