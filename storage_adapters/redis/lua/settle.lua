-- End claims: CLAIMED -> ARGV[2] (enqueued, scheduled or expired), for each id still held
-- under its own claim token (claims from different lock leases can be settled together). A
-- claim given back (scheduled) that a pause holds becomes HELD, in the held set, instead.
-- KEYS: 1 claim leases, 2 claimed-state index, 3 index of the target state, then for a finished
--       target: 4 its finished index, by finish time, which retention purges from; for a
--       scheduled target: 4 pauses, 5 held set
-- ARGV: 1 job key prefix, 2 target state, 3 '1' to set last_error to ARGV[4] else '0',
--       4 error text, then id, token per claim
-- Returns the ids that were settled. Three calls per job; the indexes once per slice.
local at = fmt(now())
local back_to_schedule = ARGV[2] == 'scheduled'
local paused = back_to_schedule and pauses_in_force(KEYS[4])
local settled, target_index, finished_index, held_index = {}, {}, {}, {}
for i = 5, #ARGV, 2 do
  local id = ARGV[i]
  local key = ARGV[1] .. id
  local job
  if paused then
    job = redis.call('HMGET', key, 'state', 'claim_token', 'due_at', 'task', 'queue')
  else
    job = redis.call('HMGET', key, 'state', 'claim_token', 'due_at')
  end
  if job[1] == 'claimed' and job[2] == ARGV[i + 1] then
    local held = paused and is_held(paused, job[4], job[5])
    local state = held and 'held' or ARGV[2]
    if ARGV[3] == '1' then
      redis.call('HSET', key, 'state', state, 'updated_at', at, 'last_error', ARGV[4])
    else
      redis.call('HSET', key, 'state', state, 'updated_at', at)
    end
    if back_to_schedule then
      redis.call('HDEL', key, 'lease_until', 'claim_token')
    else  -- a job that ended needs its broker message no more
      redis.call('HDEL', key, 'lease_until', 'envelope')
    end
    settled[#settled + 1] = id
    add_member(held and held_index or target_index, job[3], id)
    add_member(finished_index, at, id)
  end
end
call_in_slices('ZREM', KEYS[1], settled)
call_in_slices('ZREM', KEYS[2], settled)
call_in_slices('ZADD', KEYS[3], target_index)
if back_to_schedule then
  call_in_slices('ZADD', KEYS[5], held_index)
elseif KEYS[4] then
  call_in_slices('ZADD', KEYS[4], finished_index)
end
return settled
