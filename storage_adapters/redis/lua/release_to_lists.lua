-- Release a due batch in one step where the broker's lists live on this same server: a job with
-- an envelope ('<list key>\n<message>') is pushed onto that list and marked Enqueued by this
-- script, so it is in the broker and Enqueued, or neither; a job without one is claimed (as in
-- claim_due) for the caller to send the usual way.
-- The envelope format's reference is parallel_scheduler/envelopes.py (encode_envelope and
-- decode_envelope, the Python side's only reader and writer); a script cannot call Python, so
-- this one splits the envelope itself, at its first newline, exactly as decode_envelope does.
-- A due job a pause holds (its pause's sweep has not reached it yet) is neither pushed nor
-- claimed but moved to the held set; with no pause in force that costs one HLEN per call.
-- KEYS: 1 lock, 2 schedule, 3 claim leases, 4 claimed-state index, 5 enqueued-state index,
--       6 enqueued finished index (by finish time, which retention purges from), 7 pauses,
--       8 held set
-- ARGV: 1 job key prefix, 2 lock owner, 3 lock token, 4 lease seconds, 5 limit,
--       6 the broker's database number, 7 this storage's database number
-- Returns {moved, rows...}: the first `moved` rows went to the broker, the rest are claims;
-- each row is id, task, payload, due_at, attempts, envelope, queue, slot_at ('' for payload and
-- envelope when moved; '' for no envelope, queue or slot_at).
local at = now()
if not lock_is_current(KEYS[1], ARGV[2], ARGV[3], at) then
  return {0}
end
local stamp, lease_until = fmt(at), fmt(at + tonumber(ARGV[4]))
local broker_db, storage_db = ARGV[6], ARGV[7]
local paused = pauses_in_force(KEYS[7])
local ids = redis.call('ZRANGE', KEYS[2], '-inf', stamp, 'BYSCORE', 'LIMIT', 0, ARGV[5])

-- Read everything first: no write happens before we know every push can succeed. Parallel
-- arrays rather than a table per job: this loop is the whole cost of a release.
local job_ids, tasks, dues, attempts, envelopes, lists_of = {}, {}, {}, {}, {}, {}
local queues, slots = {}, {}
local by_list, lists, held, held_dues = {}, {}, {}, {}
for _, id in ipairs(ids) do
  -- a claim carries queue and slot_at for the rate limits (two fields more, same call)
  local job = redis.call('HMGET', ARGV[1] .. id, 'state', 'task', 'due_at', 'attempts',
    'envelope', 'queue', 'slot_at')
  -- A job not 'scheduled' cannot be in the schedule while every write goes through these
  -- scripts; it is only dropped from the schedule (below), which heals such a state.
  if job[1] == 'scheduled' and paused and is_held(paused, job[2], job[6]) then
    local h = #held + 1
    held[h], held_dues[h] = id, job[3]
  elseif job[1] == 'scheduled' then
    local n = #job_ids + 1
    job_ids[n], tasks[n], dues[n], attempts[n] = id, job[2], job[3], tonumber(job[4] or '0') + 1
    queues[n], slots[n] = job[6] or '', job[7] or ''
    local envelope = job[5]
    local cut = envelope and string.find(envelope, '\n', 1, true)
    if cut then
      local list = string.sub(envelope, 1, cut - 1)
      envelopes[n], lists_of[n] = envelope, list
      if not by_list[list] then
        by_list[list] = {}
        lists[#lists + 1] = list
      end
    else
      lists_of[n] = false
    end
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
for n = 1, #job_ids do
  local list = lists_of[n]
  if list and pushable[list] then
    local messages = by_list[list]
    messages[#messages + 1] = string.sub(envelopes[n], #list + 2)
  else
    lists_of[n] = false
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

-- Moved rows carry no payload (the caller only reports them); claimed rows carry everything.
local moved, claimed = {}, {}
local enqueued_index, finished_index, leases, claimed_index = {}, {}, {}, {}
for n = 1, #job_ids do
  local id = job_ids[n]
  local key = ARGV[1] .. id
  if lists_of[n] then
    -- the message is not kept once sent: emptied in the same call rather than a second HDEL
    redis.call('HSET', key, 'state', 'enqueued', 'attempts', attempts[n],
      'claim_token', ARGV[3], 'updated_at', stamp, 'envelope', '')
    local m = #moved
    moved[m + 1], moved[m + 2], moved[m + 3] = id, tasks[n], ''
    moved[m + 4], moved[m + 5], moved[m + 6], moved[m + 7] = dues[n], attempts[n], '', queues[n]
    moved[m + 8] = slots[n]
    add_member(enqueued_index, dues[n], id)
    add_member(finished_index, stamp, id)
  else
    redis.call('HSET', key, 'state', 'claimed', 'attempts', attempts[n],
      'claim_token', ARGV[3], 'lease_until', lease_until, 'updated_at', stamp)
    local m = #claimed
    claimed[m + 1], claimed[m + 2] = id, tasks[n]
    claimed[m + 3] = redis.call('HGET', key, 'payload')
    claimed[m + 4], claimed[m + 5], claimed[m + 6] = dues[n], attempts[n], envelopes[n] or ''
    claimed[m + 7], claimed[m + 8] = queues[n], slots[n]
    add_member(leases, lease_until, id)
    add_member(claimed_index, dues[n], id)
  end
end
call_in_slices('ZREM', KEYS[2], ids)
call_in_slices('ZADD', KEYS[5], enqueued_index)
call_in_slices('ZADD', KEYS[6], finished_index)
call_in_slices('ZADD', KEYS[3], leases)
call_in_slices('ZADD', KEYS[4], claimed_index)
if #held > 0 then
  hold_found(KEYS[8], ARGV[1], held, held_dues, stamp)
end

local out = {#moved / 8}
for _, rows in ipairs({moved, claimed}) do
  for i = 1, #rows do
    out[#out + 1] = rows[i]
  end
end
return out
