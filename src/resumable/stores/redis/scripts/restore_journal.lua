-- restore_journal: put an archived run's records back and delete its stub.
-- KEYS[1] stub key, KEYS[2] steps key, KEYS[3] inputs key, KEYS[4] the stubs zset.
-- ARGV: the packed stub expected, run id, step count n, then n (seq, packed record)
-- pairs, then (input key, packed input) pairs.
-- Returns 1, or 0 (changing nothing) if the stub is not the one expected.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[4], ARGV[2])
local n = tonumber(ARGV[3])
local at = 4
for _ = 1, n do
  redis.call('HSETNX', KEYS[2], ARGV[at], ARGV[at + 1])
  at = at + 2
end
while at < #ARGV do
  redis.call('HSETNX', KEYS[3], ARGV[at], ARGV[at + 1])
  at = at + 2
end
return 1
