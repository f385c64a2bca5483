-- delete_unreferenced_chunks: delete up to `limit` chunks no snapshot references.
-- `orphans` may hold hashes referenced again since; those are dropped from it, kept.
-- KEYS[1] chunks, KEYS[2] chunkrefs, KEYS[3] orphans. ARGV: limit. Returns how many.
local limit = tonumber(ARGV[1])
local deleted = 0
while deleted < limit do
  local batch = redis.call('SPOP', KEYS[3], limit - deleted)
  if #batch == 0 then
    break
  end
  for _, hash in ipairs(batch) do
    if redis.call('HEXISTS', KEYS[2], hash) == 0 then
      deleted = deleted + redis.call('HDEL', KEYS[1], hash)
    end
  end
end
return deleted
