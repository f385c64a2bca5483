-- commit_step: insert or replace the record at seq, only if `fence` is still current.
-- KEYS[1] run key, KEYS[2] steps key. ARGV: fence, seq, packed record.
-- Returns 1, or 0 if fenced out (or the run is gone).
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
