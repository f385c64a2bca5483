-- replace_snapshots: swap checkpoints of one namespace for one record (a pack),
-- atomically; nothing changes unless every checkpoint named still exists.
-- KEYS[1] cps, KEYS[2] cp (the namespace swapped out), KEYS[3] cps, KEYS[4] cp (the
-- record's namespace), KEYS[5] nss, KEYS[6] threads. ARGV: base, record id, packed
-- record, record namespace, n, n refs, thread_id, created_at_ms, then the checkpoint
-- ids to delete. Returns 1, or 0 if one
-- of them is gone.
local last_ref = 5 + tonumber(ARGV[5])
local first_id = last_ref + 3
for i = first_id, #ARGV do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    return 0
  end
end
-- references first: a chunk both sides name never reaches zero on the way
for i = 6, last_ref do
  incref(ARGV[i])
end
local previous = redis.call('HGET', KEYS[4], ARGV[2])
if previous then
  for _, ref in ipairs(snapshot_refs(previous)) do
    decref(ref)
  end
end
for i = first_id, #ARGV do
  -- the record replacing itself (made full under its own id) was `previous`
  if not (KEYS[2] == KEYS[4] and ARGV[i] == ARGV[2]) then
    for _, ref in ipairs(snapshot_refs(redis.call('HGET', KEYS[2], ARGV[i]))) do
      decref(ref)
    end
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
redis.call('HSET', KEYS[4], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[2])
redis.call('SADD', KEYS[5], ARGV[4])
touch_thread(KEYS[6], ARGV[last_ref + 1], ARGV[last_ref + 2])
return 1
