-- save_snapshot: insert (or replace) a checkpoint and count its chunk references.
-- KEYS[1] cps (ids), KEYS[2] cp (records), KEYS[3] nss (namespaces).
-- ARGV: base, checkpoint_id, packed record, namespace, ref...
local previous = redis.call('HGET', KEYS[2], ARGV[2])
for i = 5, #ARGV do
  incref(ARGV[i])
end
if previous then
  for _, ref in ipairs(snapshot_refs(previous)) do
    decref(ref)
  end
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[1], 0, ARGV[2])
redis.call('SADD', KEYS[3], ARGV[4])
return 1
