-- lib.lua: prepended to every script that touches runs (ARGV[1] is the key base).
local B = ARGV[1]
local TERMINAL = {succeeded = true, failed = true, cancelled = true}
local RUN_FIELDS = {
  'status', 'workflow', 'created_at_ms', 'queue', 'lease_owner',
  'lease_expires_at_ms', 'fence', 'wake_at_ms', 'version',
}

-- numbers go back to Redis as exact decimals, never as "1.8e+12"
local function int(x)
  return string.format('%d', x)
end

local function run_key(id)
  return B .. 'run:' .. id
end

-- the fields the state machine needs (not the payloads); nil if the run is missing
local function load_run(id)
  local values = redis.call('HMGET', run_key(id), unpack(RUN_FIELDS))
  if not values[1] then
    return nil
  end
  local run = {}
  for i, name in ipairs(RUN_FIELDS) do
    if values[i] then
      run[name] = values[i]
    end
  end
  return run
end

local function is_runnable(run, now)
  local status = run.status
  if status == 'queued' then
    return true
  end
  if status == 'running' then
    return tonumber(run.lease_expires_at_ms) <= now
  end
  if status == 'sleeping' or status == 'waiting' then
    return run.wake_at_ms ~= nil and tonumber(run.wake_at_ms) <= now
  end
  return false
end

local function can_acquire(run, owner, now, take_over)
  if TERMINAL[run.status] then
    return false
  end
  if run.status ~= 'running' or run.lease_owner == nil then
    return true
  end
  return tonumber(run.lease_expires_at_ms) <= now
    or run.lease_owner == owner
    or (take_over ~= nil and run.lease_owner == take_over)
end

-- counts: runs per (status, queue), for count_runs without reading the runs; a
-- field is status .. "\n" .. ("q" .. queue, or "-" for a run without a queue)
local function count_run(status, queue, delta)
  local field = status .. '\n' .. (queue and ('q' .. queue) or '-')
  if redis.call('HINCRBY', B .. 'counts', field, delta) <= 0 then
    redis.call('HDEL', B .. 'counts', field)
  end
end

-- Keep every index that depends on a mutable field in step with the run:
--   st:<status>       list_runs by status (and counts, by status and queue)
--   rdy:<workflow>    claimable now (queued, or a due timer promoted by a claim)
--   timers            running by lease expiry; sleeping/waiting by wake_at_ms
--   qactive:<queue>   the queue's leased runs by lease expiry (concurrency)
local function refile(id, run, old_status)
  local status = run.status
  if old_status ~= status then
    if old_status then
      redis.call('ZREM', B .. 'st:' .. old_status, id)
      count_run(old_status, run.queue, -1)
    end
    redis.call('ZADD', B .. 'st:' .. status, run.created_at_ms, id)
    count_run(status, run.queue, 1)
  end
  local ready = B .. 'rdy:' .. run.workflow
  if status == 'queued' then
    redis.call('ZREM', B .. 'timers', id)
    redis.call('ZADD', ready, run.created_at_ms, id)
  else
    redis.call('ZREM', ready, id)
    local due = nil
    if status == 'running' then
      due = run.lease_expires_at_ms
    elseif status == 'sleeping' or status == 'waiting' then
      due = run.wake_at_ms
    end
    if due then
      redis.call('ZADD', B .. 'timers', due, id)
    else
      redis.call('ZREM', B .. 'timers', id)
    end
  end
  if run.queue then
    local active = B .. 'qactive:' .. run.queue
    if status == 'running' then
      redis.call('ZADD', active, run.lease_expires_at_ms, id)
    else
      redis.call('ZREM', active, id)
    end
  end
end

-- whom a new lease for `owner` takes the run from (false: nobody), as
-- _rules.lease_taken_from decides; `run` as it stands before the lease
local function taken_from(run, owner)
  if run.status == 'running' and run.lease_owner ~= nil and run.lease_owner ~= owner then
    return run.lease_owner
  end
  return false
end

-- the run as it stands once `owner` holds a fresh lease; returns the new fence and
-- whom the lease was taken from (false: nobody)
local function lease(id, run, owner, now, expires)
  local from = taken_from(run, owner)
  local old_status = run.status
  run.status = 'running'
  run.lease_owner = owner
  run.lease_expires_at_ms = expires
  run.fence = int(tonumber(run.fence) + 1)
  redis.call('HSET', run_key(id), 'status', 'running', 'lease_owner', owner,
    'lease_expires_at_ms', expires, 'fence', run.fence, 'updated_at_ms', now)
  refile(id, run, old_status)
  return run.fence, from
end

local function notify(id)
  redis.call('PUBLISH', B .. 'work', id)
end

-- packed items: 4-byte big-endian length + bytes each; length 0xFFFFFFFF is nil
local function unpack_items(data, skip)
  local items, pos, size, index = {}, 1, #data, 0
  while pos <= size do
    local a, b, c, d = string.byte(data, pos, pos + 3)
    local len = ((a * 256 + b) * 256 + c) * 256 + d
    pos = pos + 4
    index = index + 1
    if len == 4294967295 then
      len = 0
    elseif index > skip then
      items[#items + 1] = string.sub(data, pos, pos + len - 1)
    end
    pos = pos + len
  end
  return items
end

-- the length of the item at 0-based `at` of a packed record (0 for a None item)
local function packed_len(data, at)
  local pos, index = 1, 0
  while pos <= #data do
    local a, b, c, d = string.byte(data, pos, pos + 3)
    local len = ((a * 256 + b) * 256 + c) * 256 + d
    if len == 4294967295 then
      len = 0
    end
    if index == at then
      return len
    end
    pos, index = pos + 4 + len, index + 1
  end
  return 0
end

-- a snapshot record packs parent, manifest, created, label, metadata, then its refs
local function snapshot_refs(record)
  return unpack_items(record, 5)
end

local function thread_suffix(thread, namespace)
  return #thread .. ':' .. thread .. namespace
end

local function incref(hash)
  redis.call('HINCRBY', B .. 'chunkrefs', hash, 1)
end

-- store a chunk by content hash (a hash already present is left alone); a new one
-- no snapshot references yet joins `orphans`, the GC's worklist
local function put_chunk(hash, data)
  if redis.call('HSETNX', B .. 'chunks', hash, data) == 1
    and redis.call('HEXISTS', B .. 'chunkrefs', hash) == 0 then
    redis.call('SADD', B .. 'orphans', hash)
  end
end

local function decref(hash)
  if redis.call('HINCRBY', B .. 'chunkrefs', hash, -1) <= 0 then
    redis.call('HDEL', B .. 'chunkrefs', hash)
    redis.call('SADD', B .. 'orphans', hash)
  end
end

-- HMGET in slices: unpack() of a long list overflows the Lua C stack
local function hmget_all(key, fields)
  local values = {}
  for start = 1, #fields, 1000 do
    local part = redis.call('HMGET', key, unpack(fields, start, math.min(start + 999, #fields)))
    for _, value in ipairs(part) do
      values[#values + 1] = value
    end
  end
  return values
end

-- byte order, for ties in claim order (Lua's `<` on strings follows the locale)
local function bytes_lt(x, y)
  local n = math.min(#x, #y)
  for i = 1, n do
    local p, q = string.byte(x, i), string.byte(y, i)
    if p ~= q then
      return p < q
    end
  end
  return #x < #y
end

-- threads: a zset of thread ids by their newest snapshot's created_at_ms
local function touch_thread(threads, thread, created_at_ms)
  local score = redis.call('ZSCORE', threads, thread)
  if not score or tonumber(score) < tonumber(created_at_ms) then
    redis.call('ZADD', threads, created_at_ms, thread)
  end
end

-- the item at 0-based `at` of a packed record (nil for a None item or past the end)
local function packed_item(data, at)
  local pos, index = 1, 0
  while pos <= #data do
    local a, b, c, d = string.byte(data, pos, pos + 3)
    local len = ((a * 256 + b) * 256 + c) * 256 + d
    if index == at then
      if len == 4294967295 then
        return nil
      end
      return string.sub(data, pos + 4, pos + 3 + len)
    end
    if len == 4294967295 then
      len = 0
    end
    pos, index = pos + 4 + len, index + 1
  end
  return nil
end

-- a snapshot record's created_at_ms (its third item)
local function snapshot_created(record)
  return tonumber(packed_item(record, 2) or '0')
end

-- after snapshots of a thread went: forget its emptied namespaces, and unlist it
-- if none is left; `lowered` (its newest snapshot went) sets its time again from
-- the snapshots left, as the SQL stores compute it
local function settle_thread(nss, threads, thread, lowered)
  local newest = nil
  for _, namespace in ipairs(redis.call('SMEMBERS', nss)) do
    local records = B .. 'cp:' .. thread_suffix(thread, namespace)
    if redis.call('HLEN', records) == 0 then
      redis.call('SREM', nss, namespace)
    elseif lowered then
      for _, record in ipairs(redis.call('HVALS', records)) do
        local created = snapshot_created(record)
        if newest == nil or created > newest then
          newest = created
        end
      end
    end
  end
  if redis.call('SCARD', nss) == 0 then
    redis.call('ZREM', threads, thread)
  elseif newest ~= nil then
    redis.call('ZADD', threads, int(newest), thread)
  end
end
