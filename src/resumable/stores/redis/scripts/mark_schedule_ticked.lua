-- mark_schedule_ticked: raise a schedule's last_tick_ms to tick_ms, never lower it.
-- KEYS[1] the schedule's hash. ARGV: tick_ms, now_ms. Returns 1 if raised, else 0.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local last = redis.call('HGET', KEYS[1], 'last_tick_ms')
if last and tonumber(last) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'last_tick_ms', ARGV[1], 'updated_at_ms', ARGV[2])
return 1
