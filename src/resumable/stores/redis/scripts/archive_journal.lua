-- archive_journal: swap a finished run's journal and inputs for its archive stub.
-- KEYS[1] run key, KEYS[2] steps key, KEYS[3] inputs key, KEYS[4] stub key,
-- KEYS[5] the stubs zset. ARGV: fence, steps, inputs, packed stub, run id.
-- Returns 1, or 0 (changing nothing) unless the run is finished, its fence is still
-- `fence`, it has no stub and it holds exactly that many steps and inputs.
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'succeeded' and status ~= 'failed' and status ~= 'cancelled' then
  return 0
end
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1]
    or redis.call('EXISTS', KEYS[4]) == 1
    or redis.call('HLEN', KEYS[2]) ~= tonumber(ARGV[2])
    or redis.call('HLEN', KEYS[3]) ~= tonumber(ARGV[3]) then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('SET', KEYS[4], ARGV[4])
redis.call('ZADD', KEYS[5], 0, ARGV[5])
return 1
