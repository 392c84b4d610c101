-- Release a due batch in one step where the broker's lists live on this same server: a job with
-- an envelope ('<list key>\n<message>') is pushed onto that list and marked Enqueued by this
-- script, so it is in the broker and Enqueued, or neither; a job without one is claimed (as in
-- claim_due) for the caller to send the usual way.
-- KEYS: 1 lock, 2 schedule, 3 claim leases, 4 claimed-state index, 5 enqueued-state index
-- ARGV: 1 job key prefix, 2 lock owner, 3 lock token, 4 lease seconds, 5 limit,
--       6 the broker's database number, 7 this storage's database number
-- Returns {moved, rows...}: the first `moved` rows went to the broker, the rest are claims;
-- each row is id, task, payload, due_at, attempts, envelope ('' for the moved ones).
local at = now()
if not lock_is_current(KEYS[1], ARGV[2], ARGV[3], at) then
  return {0}
end
local stamp, lease_until = fmt(at), fmt(at + tonumber(ARGV[4]))
local broker_db, storage_db = ARGV[6], ARGV[7]
local ids = redis.call('ZRANGE', KEYS[2], '-inf', stamp, 'BYSCORE', 'LIMIT', 0, ARGV[5])

-- Read everything first: no write happens before we know every push can succeed.
local jobs, by_list, lists = {}, {}, {}
for _, id in ipairs(ids) do
  local job = redis.call('HMGET', ARGV[1] .. id, 'task', 'payload', 'due_at', 'state', 'attempts',
    'envelope')
  -- A job not 'scheduled' cannot be in the schedule while every write goes through these
  -- scripts; it is only dropped from the schedule (below), which heals such a state.
  if job[4] == 'scheduled' then
    local entry = {id = id, task = job[1], payload = job[2], due = job[3],
      attempts = tonumber(job[5] or '0') + 1}
    local cut = job[6] and string.find(job[6], '\n', 1, true)
    if cut then
      entry.list, entry.message = string.sub(job[6], 1, cut - 1), string.sub(job[6], cut + 1)
      entry.envelope = job[6]
      if not by_list[entry.list] then
        by_list[entry.list] = {}
        lists[#lists + 1] = entry.list
      end
    end
    jobs[#jobs + 1] = entry
  end
end

-- A list key holding something else would fail the push: its jobs take the claim path instead,
-- where the dispatcher reports the problem and the jobs stay due.
if broker_db ~= storage_db then
  redis.call('SELECT', broker_db)
end
local pushable = {}
for _, list in ipairs(lists) do
  local kind = redis.call('TYPE', list)['ok']
  pushable[list] = kind == 'list' or kind == 'none'
end
for _, entry in ipairs(jobs) do
  if entry.list and pushable[entry.list] then
    local messages = by_list[entry.list]
    messages[#messages + 1] = entry.message
  else
    entry.list = nil
  end
end
for _, list in ipairs(lists) do
  if #by_list[list] > 0 then
    call_in_slices('LPUSH', list, by_list[list])
  end
end
if broker_db ~= storage_db then
  redis.call('SELECT', storage_db)
end

local moved, claimed = {}, {}
local enqueued_index, leases, claimed_index = {}, {}, {}
for _, entry in ipairs(jobs) do
  local key = ARGV[1] .. entry.id
  if entry.list then
    redis.call('HSET', key, 'state', 'enqueued', 'attempts', entry.attempts,
      'claim_token', ARGV[3], 'updated_at', stamp)
    redis.call('HDEL', key, 'envelope')
    local n = #moved
    moved[n + 1], moved[n + 2], moved[n + 3] = entry.id, entry.task, entry.payload
    moved[n + 4], moved[n + 5], moved[n + 6] = entry.due, entry.attempts, ''
    enqueued_index[#enqueued_index + 1] = entry.due
    enqueued_index[#enqueued_index + 1] = entry.id
  else
    redis.call('HSET', key, 'state', 'claimed', 'attempts', entry.attempts,
      'claim_token', ARGV[3], 'lease_until', lease_until, 'updated_at', stamp)
    local n = #claimed
    claimed[n + 1], claimed[n + 2], claimed[n + 3] = entry.id, entry.task, entry.payload
    claimed[n + 4], claimed[n + 5], claimed[n + 6] = entry.due, entry.attempts,
      entry.envelope or ''
    leases[#leases + 1] = lease_until
    leases[#leases + 1] = entry.id
    claimed_index[#claimed_index + 1] = entry.due
    claimed_index[#claimed_index + 1] = entry.id
  end
end
call_in_slices('ZREM', KEYS[2], ids)
call_in_slices('ZADD', KEYS[5], enqueued_index)
call_in_slices('ZADD', KEYS[3], leases)
call_in_slices('ZADD', KEYS[4], claimed_index)

local out = {#moved / 6}
for _, rows in ipairs({moved, claimed}) do
  for i = 1, #rows do
    out[#out + 1] = rows[i]
  end
end
return out
