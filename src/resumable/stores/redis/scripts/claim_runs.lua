-- claim_runs: lease up to `limit` runnable runs of the given workflows, oldest first,
-- enforcing queue policies. One script, so concurrent claimers never share a run.
-- The decisions' numbers come from resumable.stores.claims: `window` (candidates read
-- per workflow) and each rate's `since_ms`; the script only applies them atomically.
-- KEYS[1] timers. ARGV: base, owner, now_ms, expires_at_ms, limit, window, n,
-- workflow x n, m, (queue, concurrency, rate, since_ms) x m   ('' = no limit),
-- v, version x v   (v = -1: any version; else only runs of these versions).
-- Returns a flat list: run_id, fence, taken_from (nil: nobody), run_id, fence, ...
local owner, now_text, expires = ARGV[2], ARGV[3], ARGV[4]
local now, limit, window = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[6])
local pos = 7
local workflows = {}
for i = 1, tonumber(ARGV[pos]) do
  workflows[i] = ARGV[pos + i]
end
pos = pos + #workflows + 1
local policies = {}
for _ = 1, tonumber(ARGV[pos]) do
  policies[ARGV[pos + 1]] = {
    concurrency = tonumber(ARGV[pos + 2]),
    rate = tonumber(ARGV[pos + 3]),
    since = ARGV[pos + 4],
  }
  pos = pos + 4
end
pos = pos + 1
local versions = nil
if tonumber(ARGV[pos]) >= 0 then
  versions = {}
  for i = 1, tonumber(ARGV[pos]) do
    versions[ARGV[pos + i]] = true
  end
end

-- timers that came due (expired leases, ended sleeps, wait timeouts) become claimable
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_text, 'LIMIT', 0, 1000)
for _, id in ipairs(due) do
  local run = load_run(id)
  if not run then
    redis.call('ZREM', KEYS[1], id)
  elseif is_runnable(run, now) then
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZADD', B .. 'rdy:' .. run.workflow, run.created_at_ms, id)
  else
    refile(id, run, run.status)
  end
end

local candidates = {}
for _, workflow in ipairs(workflows) do
  local ready = B .. 'rdy:' .. workflow
  local found = redis.call('ZRANGE', ready, 0, window - 1, 'WITHSCORES')
  for i = 1, #found, 2 do
    candidates[#candidates + 1] = {tonumber(found[i + 1]), found[i], ready}
  end
end
table.sort(candidates, function(a, b)
  if a[1] ~= b[1] then
    return a[1] < b[1]
  end
  return bytes_lt(a[2], b[2])
end)

-- claims.refusal over the queue's load as it stands in this script
local function admits(queue, policy, is_start)
  if policy.concurrency then
    local active = redis.call('ZCOUNT', B .. 'qactive:' .. queue, '(' .. now_text, '+inf')
    if active >= policy.concurrency then
      return false
    end
  end
  if policy.rate and is_start then
    local starts = B .. 'qstarts:' .. queue
    redis.call('ZREMRANGEBYSCORE', starts, '-inf', policy.since)
    if redis.call('ZCARD', starts) >= policy.rate then
      return false
    end
  end
  return true
end

local claimed = {}
for _, candidate in ipairs(candidates) do
  if #claimed >= limit * 3 then
    break
  end
  local id = candidate[2]
  local run = load_run(id)
  if not run then
    redis.call('ZREM', candidate[3], id)
  elseif not is_runnable(run, now) then
    refile(id, run, run.status)
  elseif versions and not (run.version and versions[run.version]) then
    -- another version's run: left ready for a worker that runs it
  else
    local is_start = run.status == 'queued'
    local policy = run.queue and policies[run.queue]
    if not policy or admits(run.queue, policy, is_start) then
      local fence, from = lease(id, run, owner, now_text, expires)
      if policy and policy.rate and is_start then
        redis.call('ZADD', B .. 'qstarts:' .. run.queue, now_text, fence .. ':' .. id)
      end
      claimed[#claimed + 1] = id
      claimed[#claimed + 1] = fence
      claimed[#claimed + 1] = from
    end
  end
end
return claimed
