-- set_schedule_paused: pause or resume a schedule, and mark the ticks up to
-- through_ms as passed (never lowering last_tick_ms).
-- KEYS[1] the schedule's hash. ARGV: paused (0/1), through_ms ('' for none), now_ms.
-- Returns the hash's fields, flat, or an empty list if there is no such schedule.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
redis.call('HSET', KEYS[1], 'paused', ARGV[1], 'updated_at_ms', ARGV[3])
if ARGV[2] ~= '' then
  local last = redis.call('HGET', KEYS[1], 'last_tick_ms')
  if not last or tonumber(last) < tonumber(ARGV[2]) then
    redis.call('HSET', KEYS[1], 'last_tick_ms', ARGV[2])
  end
end
return redis.call('HGETALL', KEYS[1])
