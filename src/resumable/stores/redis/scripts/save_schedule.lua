-- save_schedule: record a schedule's definition, keeping the state of one saved before.
-- KEYS[1] the schedule's hash, KEYS[2] the set of schedule names.
-- ARGV: name, workflow, cron, tz, catch_up, created_at_ms, updated_at_ms.
-- Returns the hash's fields, flat.
redis.call('HSET', KEYS[1], 'workflow', ARGV[2], 'cron', ARGV[3], 'tz', ARGV[4],
  'catch_up', ARGV[5], 'updated_at_ms', ARGV[7])
redis.call('HSETNX', KEYS[1], 'created_at_ms', ARGV[6])
redis.call('HSETNX', KEYS[1], 'paused', '0')
redis.call('SADD', KEYS[2], ARGV[1])
return redis.call('HGETALL', KEYS[1])
