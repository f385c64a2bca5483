-- count_all_runs: rebuild counts from the st:<status> indexes (schema 1 to 2).
-- KEYS[1] meta. ARGV: base, then every status. Atomic, so writers that keep counts
-- meanwhile are neither lost nor counted twice; does nothing once at schema 2.
-- Returns how many runs it counted, or -1 if the store was already at schema 2.
if tonumber(redis.call('HGET', KEYS[1], 'schema_version') or '0') >= 2 then
  return -1
end
redis.call('DEL', B .. 'counts')
local total = 0
for i = 2, #ARGV do
  local status = ARGV[i]
  for _, id in ipairs(redis.call('ZRANGE', B .. 'st:' .. status, 0, -1)) do
    count_run(status, redis.call('HGET', run_key(id), 'queue'), 1)
    total = total + 1
  end
end
redis.call('HSET', KEYS[1], 'schema_version', 2)
return total
