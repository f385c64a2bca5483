-- put_chunks: store chunks by content hash; a hash already present is left alone.
-- A new chunk no snapshot references yet joins `orphans`, the GC's worklist.
-- KEYS[1] chunks, KEYS[2] chunkrefs, KEYS[3] orphans. ARGV: hash, data, hash, data...
for i = 1, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1
    and redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    redis.call('SADD', KEYS[3], ARGV[i])
  end
end
return 1
