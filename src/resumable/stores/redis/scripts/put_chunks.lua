-- put_chunks: store chunks by content hash (lib.lua's put_chunk).
-- KEYS[1] chunks, KEYS[2] chunkrefs, KEYS[3] orphans.
-- ARGV: base, then hash, data, hash, data...
for i = 2, #ARGV, 2 do
  put_chunk(ARGV[i], ARGV[i + 1])
end
return 1
