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

-- The pauses in force (the pauses hash: field 'queue:<name>' or 'task:<name>'), as a set of
-- fields, or nil when nothing is paused: one HLEN per script run then, nothing per job, so the
-- release and firing scripts cost the same as before pauses existed.
local function pauses_in_force(pauses_key)
  if redis.call('HLEN', pauses_key) == 0 then
    return nil
  end
  local fields = {}
  for _, field in ipairs(redis.call('HKEYS', pauses_key)) do
    fields[field] = true
  end
  return fields
end

-- Whether a pause holds a job of `task` stored with `queue` (false or '' when unknown).
local function is_held(paused, task, queue)
  if not paused then
    return false
  end
  if paused['task:' .. task] then
    return true
  end
  return queue and queue ~= '' and paused['queue:' .. queue] == true or false
end

-- SCHEDULED -> HELD for jobs found in the due set that a pause holds (the claim scripts heal so
-- while a pause's sweep is still under way): ids are dropped from the due set by the caller.
local function hold_found(held_key, job_prefix, ids, dues, stamp)
  local members = {}
  for n, id in ipairs(ids) do
    redis.call('HSET', job_prefix .. id, 'state', 'held', 'updated_at', stamp)
    add_member(members, dues[n], id)
  end
  call_in_slices('ZADD', held_key, members)
end

-- Store one new job unless its id exists in any state (idempotent accept); shared by
-- fire_recurring and trigger_recurring so a firing job is stored exactly like an accepted one
-- (add_jobs does the same, batched). Held instead of scheduled when a pause holds it (paused:
-- pauses_in_force). Returns 1 if stored, 0 if the id existed (that job is left untouched).
-- keys = {all-jobs index, schedule, held set}. envelope and queue are '' when the job has none.
local function add_job(keys, paused, job_prefix, id, task, payload, due, envelope, queue, stamp)
  local key = job_prefix .. id
  if redis.call('EXISTS', key) == 1 then
    return 0
  end
  local held = is_held(paused, task, queue)
  redis.call('HSET', key, 'task', task, 'payload', payload, 'due_at', due,
    'state', held and 'held' or 'scheduled', 'attempts', 0, 'created_at', stamp,
    'updated_at', stamp)
  if envelope ~= '' then
    redis.call('HSET', key, 'envelope', envelope)
  end
  if queue ~= '' then
    redis.call('HSET', key, 'queue', queue)
  end
  redis.call('ZADD', keys[1], due, id)
  redis.call('ZADD', held and keys[3] or keys[2], due, id)
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
-- created_at, updated_at, pause_note, paused_by, paused_at} of the recurring jobs in ids that
-- exist (the order of _RECURRING_FIELDS in redis/recurring.py; a pause's fields nil if unset).
local function recurring_rows(rec_prefix, ids)
  return hash_rows(rec_prefix, ids, {'task', 'payload', 'schedule', 'enabled', 'next_run_at',
    'last_run_at', 'history', 'version', 'created_at', 'updated_at', 'pause_note', 'paused_by',
    'paused_at'})
end

-- a > b in the bytewise order Redis gives members of equal score (Lua's own < uses the locale)
local function bytes_after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return #a > #b
end

-- The rank in sorted set key of the first member after (score, member), whether or not that
-- member is still there: a binary search over the ranks holding that score. A keyset cursor
-- for walks that other clients change between their scripts (browsing pages, pause sweeps).
local function rank_after(key, score, member)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = lo + redis.call('ZCOUNT', key, score, score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if bytes_after(redis.call('ZRANGE', key, mid, mid)[1], member) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

