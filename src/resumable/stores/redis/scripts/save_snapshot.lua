-- save_snapshot: store new chunks (lib.lua's put_chunk), insert (or replace) a
-- checkpoint and count its chunk references, atomically.
-- KEYS[1] cps (ids), KEYS[2] cp (records), KEYS[3] nss (namespaces), KEYS[4] chunks,
-- KEYS[5] chunkrefs, KEYS[6] orphans (the last three as lib.lua names them),
-- KEYS[7] threads. ARGV: base, checkpoint_id, packed record, namespace, n, n refs,
-- thread_id, created_at_ms, then hash, data...
-- Atomic with delete_unreferenced_chunks, so a ref found here stays found.
-- Returns the refs that are neither stored nor given, and then saves nothing.
local last_ref = 5 + tonumber(ARGV[5])
local first_chunk = last_ref + 3
local given = {}
for i = first_chunk, #ARGV, 2 do
  given[ARGV[i]] = true
end
local missing = {}
for i = 6, last_ref do
  if not given[ARGV[i]] and redis.call('HEXISTS', KEYS[4], ARGV[i]) == 0 then
    missing[#missing + 1] = ARGV[i]
  end
end
if #missing > 0 then
  return missing
end
local previous = redis.call('HGET', KEYS[2], ARGV[2])
-- references first: a new chunk the snapshot names never joins the orphans
for i = 6, last_ref do
  incref(ARGV[i])
end
for i = first_chunk, #ARGV, 2 do
  put_chunk(ARGV[i], ARGV[i + 1])
end
if previous then
  for _, ref in ipairs(snapshot_refs(previous)) do
    decref(ref)
  end
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[1], 0, ARGV[2])
redis.call('SADD', KEYS[3], ARGV[4])
touch_thread(KEYS[7], ARGV[last_ref + 1], ARGV[last_ref + 2])
return {}
