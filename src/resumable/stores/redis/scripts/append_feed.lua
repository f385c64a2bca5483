-- append_feed: append entries to one channel of a run's feed (stores/feeds.py).
-- KEYS[1] run key, KEYS[2] the run's feed hash. ARGV: channel prefix (length:name),
-- once_key ('' for none), now_ms, payload...
-- The hash holds, per channel: 'n'..prefix the last offset, 'e'..prefix..':'..offset
-- an entry (now_ms..':'..payload), 't'..prefix..':'..once_key a once_key seen.
-- Returns the last offset, 0 if the once_key was seen (nothing appended), -1 if the
-- run is missing.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local prefix, once_key = ARGV[1], ARGV[2]
if once_key ~= '' then
  if redis.call('HSETNX', KEYS[2], 't' .. prefix .. ':' .. once_key, '1') == 0 then
    return 0
  end
end
local last = tonumber(redis.call('HGET', KEYS[2], 'n' .. prefix) or '0')
for i = 4, #ARGV do
  last = last + 1
  redis.call('HSET', KEYS[2], 'e' .. prefix .. ':' .. string.format('%d', last),
    ARGV[3] .. ':' .. ARGV[i])
end
redis.call('HSET', KEYS[2], 'n' .. prefix, string.format('%d', last))
return last
