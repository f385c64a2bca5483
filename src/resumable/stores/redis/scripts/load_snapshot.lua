-- load_snapshot: the given checkpoint, or the latest one (ids sort lexicographically).
-- KEYS[1] cps, KEYS[2] cp, KEYS[3] chunks. ARGV: has_id ('1'/'0'), checkpoint_id.
-- Returns {checkpoint_id, packed record, how many chunks are stored}, or nil: a
-- record lists only stored chunks, each once, so the count bounds its refs.
local id = ARGV[2]
if ARGV[1] ~= '1' then
  local latest = redis.call('ZREVRANGEBYLEX', KEYS[1], '+', '-', 'LIMIT', 0, 1)
  if #latest == 0 then
    return false
  end
  id = latest[1]
end
local record = redis.call('HGET', KEYS[2], id)
if not record then
  return false
end
return {id, record, redis.call('HLEN', KEYS[3])}
