-- list_snapshots: each namespace's checkpoints newest first (the caller merges them).
-- KEYS[1] nss. ARGV: base, thread_id, all_namespaces ('1'/'0'), namespace,
-- has_before ('1'/'0'), before, limit (-1 = all).
-- Returns a flat list: how many chunks are stored (which bounds a record's refs,
-- as in load_snapshot), then namespace, checkpoint_id, packed record, ...
local thread = ARGV[2]
local namespaces = {ARGV[4]}
if ARGV[3] == '1' then
  namespaces = redis.call('SMEMBERS', KEYS[1])
end
local newest = '+'
if ARGV[5] == '1' then
  newest = '(' .. ARGV[6]
end
local out = {redis.call('HLEN', B .. 'chunks')}
for _, namespace in ipairs(namespaces) do
  local suffix = thread_suffix(thread, namespace)
  local ids = redis.call('ZREVRANGEBYLEX', B .. 'cps:' .. suffix, newest, '-', 'LIMIT', 0, ARGV[7])
  local records = hmget_all(B .. 'cp:' .. suffix, ids)
  for i, id in ipairs(ids) do
    if records[i] then
      out[#out + 1] = namespace
      out[#out + 1] = id
      out[#out + 1] = records[i]
    end
  end
end
return out
