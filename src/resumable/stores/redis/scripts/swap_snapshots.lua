-- swap_snapshots: replace snapshots as read by one record (a pack) or by none,
-- and store the new chunks it names (lib.lua's put_chunk), atomically; nothing
-- changes unless every record named still holds the manifest read, no record
-- other than one of them holds the new record's key, and every chunk the new
-- record names is given or stored. Atomic with delete_unreferenced_chunks, so a
-- ref found here stays found.
-- KEYS[1] nss, KEYS[2] threads, KEYS[3] chunks, KEYS[4] chunkrefs, KEYS[5] orphans
-- (the last three as lib.lua names them). ARGV: base, thread_id, has_by ('1' or
-- '0'), then the new record's namespace, id, packed record, created_at_ms, n, n
-- refs (blank without one), then m, m pairs (hash, data) of new chunks, then
-- (namespace, checkpoint id, manifest) of each record replaced.
-- Returns {1} once swapped; {0} if one of them changed or went; {0, hash...}
-- naming the refs neither stored nor given, if it would have swapped otherwise.
local thread, has_by = ARGV[2], ARGV[3] == '1'
local by_ns, by_id = ARGV[4], ARGV[5]
local last_ref = 8 + tonumber(ARGV[8])
local first_chunk = last_ref + 2
local last_chunk = last_ref + 1 + 2 * tonumber(ARGV[last_ref + 1])
local first_old = last_chunk + 1
local by_is_old = false
for i = first_old, #ARGV, 3 do
  local record = redis.call('HGET', B .. 'cp:' .. thread_suffix(thread, ARGV[i]), ARGV[i + 1])
  if not record or packed_item(record, 1) ~= ARGV[i + 2] then
    return {0}
  end
  by_is_old = by_is_old or (has_by and ARGV[i] == by_ns and ARGV[i + 1] == by_id)
end
local by_suffix = thread_suffix(thread, by_ns)
if has_by and not by_is_old and redis.call('HEXISTS', B .. 'cp:' .. by_suffix, by_id) == 1 then
  return {0}
end
local given = {}
for i = first_chunk, last_chunk, 2 do
  given[ARGV[i]] = true
end
local missing = {0}
for i = 9, last_ref do
  if not given[ARGV[i]] and redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 then
    missing[#missing + 1] = ARGV[i]
  end
end
if #missing > 1 then
  return missing
end
-- references first: a chunk both sides name never reaches zero on the way
-- and before the new chunks are put: one the new record names never joins the orphans
if has_by then
  for i = 9, last_ref do
    incref(ARGV[i])
  end
end
for i = first_chunk, last_chunk, 2 do
  put_chunk(ARGV[i], ARGV[i + 1])
end
local time = tonumber(redis.call('ZSCORE', KEYS[2], thread) or '0')
local gone_newest = nil
for i = first_old, #ARGV, 3 do
  local suffix = thread_suffix(thread, ARGV[i])
  local record = redis.call('HGET', B .. 'cp:' .. suffix, ARGV[i + 1])
  if record then -- a key named twice goes once
    for _, ref in ipairs(snapshot_refs(record)) do
      decref(ref)
    end
    local created = snapshot_created(record)
    if gone_newest == nil or created > gone_newest then
      gone_newest = created
    end
    redis.call('HDEL', B .. 'cp:' .. suffix, ARGV[i + 1])
    redis.call('ZREM', B .. 'cps:' .. suffix, ARGV[i + 1])
  end
end
if has_by then
  redis.call('HSET', B .. 'cp:' .. by_suffix, by_id, ARGV[6])
  redis.call('ZADD', B .. 'cps:' .. by_suffix, 0, by_id)
  redis.call('SADD', KEYS[1], by_ns)
  touch_thread(KEYS[2], thread, ARGV[7])
end
local lowered = gone_newest ~= nil and gone_newest >= time
  and not (has_by and tonumber(ARGV[7]) >= gone_newest)
settle_thread(KEYS[1], KEYS[2], thread, lowered)
return {1}
