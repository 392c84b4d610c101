-- Claim up to ARGV[5] due jobs, earliest first, under one check of the lock lease.
-- KEYS: 1 lock, 2 schedule, 3 claim leases, 4 claimed-state index, 5 pauses, 6 held set
-- ARGV: 1 job key prefix, 2 lock owner, 3 lock token, 4 lease seconds, 5 limit
-- Returns the claimed jobs flattened: id, task, payload, due_at, attempts, envelope, queue,
-- slot_at, id, ... ('' for none of the last three).
-- The hot path of the batch release: two calls per job (read, write its hash), and the three
-- indexes updated once per slice of the batch rather than once per job. A due job a pause holds
-- (its pause's sweep has not reached it yet) is moved to the held set instead of being claimed;
-- with no pause in force that costs one HLEN per call.
local at = now()
if not lock_is_current(KEYS[1], ARGV[2], ARGV[3], at) then
  return {}
end
local paused = pauses_in_force(KEYS[5])
local stamp, lease_until = fmt(at), fmt(at + tonumber(ARGV[4]))
local ids = redis.call('ZRANGE', KEYS[2], '-inf', stamp, 'BYSCORE', 'LIMIT', 0, ARGV[5])
local out, leases, claimed_index, held, held_dues = {}, {}, {}, {}, {}
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  -- the claim carries queue and slot_at for the rate limits (two fields more, same call)
  local job = redis.call('HMGET', key, 'task', 'payload', 'due_at', 'state', 'attempts',
    'envelope', 'queue', 'slot_at')
  -- A job not 'scheduled' cannot be in the schedule while every write goes through these
  -- scripts; it is only dropped from the schedule (below), which heals such a state.
  if job[4] == 'scheduled' then
    if paused and is_held(paused, job[1], job[7]) then
      local h = #held + 1
      held[h], held_dues[h] = id, job[3]
    else
      local attempts = tonumber(job[5] or '0') + 1
      redis.call('HSET', key, 'state', 'claimed', 'attempts', attempts, 'claim_token', ARGV[3],
        'lease_until', lease_until, 'updated_at', stamp)
      local n = #out
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = id, job[1], job[2], job[3]
      out[n + 5], out[n + 6], out[n + 7], out[n + 8] = attempts, job[6] or '', job[7] or '',
        job[8] or ''
      add_member(leases, lease_until, id)
      add_member(claimed_index, job[3], id)
    end
  end
end
call_in_slices('ZREM', KEYS[2], ids)
call_in_slices('ZADD', KEYS[3], leases)
call_in_slices('ZADD', KEYS[4], claimed_index)
if #held > 0 then
  hold_found(KEYS[6], ARGV[1], held, held_dues, stamp)
end
return out
