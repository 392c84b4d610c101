-- Helpers prepended to every script of the Redis adapter (Redis scripts cannot include files).
--
-- Floats cross the Lua boundary as '%.17g' strings: Lua's tostring keeps only 14 digits and a
-- Lua number returned to the client is truncated to an integer, either of which would move a
-- due time by microseconds and break equality with what the client stored.

local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function fmt(x)
  return string.format('%.17g', x)
end

-- One command over a long argument list, in slices: unpack() is bounded by Lua's C stack, and a
-- command per slice of 1000 is still far fewer calls than one per job.
local function call_in_slices(command, key, args)
  for first = 1, #args, 1000 do
    redis.call(command, key, unpack(args, first, math.min(first + 999, #args)))
  end
end

-- Append one score/member pair to a ZADD argument list (sent later with call_in_slices).
local function add_member(args, score, member)
  args[#args + 1] = score
  args[#args + 1] = member
end

-- The fence: a lease acts only while it is still the lock's current, unexpired holder.
local function lock_is_current(lock_key, owner, token, at)
  local h = redis.call('HMGET', lock_key, 'owner', 'token', 'expires_at')
  return h[1] == owner and h[2] == token and tonumber(h[3]) > at
end

-- SCHEDULED -> CLAIMED for one job already known to be due. Returns {id, task, payload, due_at,
-- attempts, envelope} or nil. keys = {schedule, claim leases, claimed-state index}.
local function claim_one(keys, job_prefix, id, token, at, lease_until)
  local key = job_prefix .. id
  local job = redis.call('HMGET', key, 'task', 'payload', 'due_at', 'state', 'envelope')
  if job[4] ~= 'scheduled' then
    -- Cannot happen while every write goes through these scripts; heal rather than spin on it.
    redis.call('ZREM', keys[1], id)
    return nil
  end
  local attempts = redis.call('HINCRBY', key, 'attempts', 1)
  redis.call('HSET', key, 'state', 'claimed', 'claim_token', token,
    'lease_until', fmt(lease_until), 'updated_at', fmt(at))
  redis.call('ZREM', keys[1], id)
  redis.call('ZADD', keys[2], fmt(lease_until), id)
  redis.call('ZADD', keys[3], job[3], id)
  return {id, job[1], job[2], job[3], attempts, job[5] or ''}
end

-- Store one new job unless its id exists in any state (idempotent accept); shared by add_jobs
-- and fire_recurring so a firing job is stored exactly like an accepted one. Returns 1 if stored,
-- 0 if the id existed (that job is left untouched). keys = {all-jobs index, schedule}.
-- envelope is '' when the job has none.
local function add_job(keys, job_prefix, id, task, payload, due, envelope, stamp)
  local key = job_prefix .. id
  if redis.call('EXISTS', key) == 1 then
    return 0
  end
  redis.call('HSET', key, 'task', task, 'payload', payload, 'due_at', due,
    'state', 'scheduled', 'attempts', 0, 'created_at', stamp, 'updated_at', stamp)
  if envelope ~= '' then
    redis.call('HSET', key, 'envelope', envelope)
  end
  redis.call('ZADD', keys[1], due, id)
  redis.call('ZADD', keys[2], due, id)
  return 1
end

-- The recurring due index holds exactly the enabled recurring jobs that have a next run, so
-- fetching due ones never filters. enabled is '1' or '0'; next_run_at is '' when there is none.
local function index_recurring_due(due_key, id, enabled, next_run_at)
  if enabled == '1' and next_run_at ~= '' then
    redis.call('ZADD', due_key, next_run_at, id)
  else
    redis.call('ZREM', due_key, id)
  end
end

-- Rows {id, fields...} of the hashes prefix .. id for the ids whose hash exists (whose first
-- field is set), in the order of ids: one snapshot, since a script runs alone.
local function hash_rows(prefix, ids, fields)
  local rows = {}
  for _, id in ipairs(ids) do
    local row = redis.call('HMGET', prefix .. id, unpack(fields))
    if row[1] then
      table.insert(row, 1, id)
      rows[#rows + 1] = row
    end
  end
  return rows
end

-- Rows {id, task, payload, schedule, enabled, next_run_at, last_run_at, history, version,
-- created_at, updated_at} of the recurring jobs in ids that exist (the order of
-- _RECURRING_FIELDS in redis_recurring.py).
local function recurring_rows(rec_prefix, ids)
  return hash_rows(rec_prefix, ids, {'task', 'payload', 'schedule', 'enabled', 'next_run_at',
    'last_run_at', 'history', 'version', 'created_at', 'updated_at'})
end
