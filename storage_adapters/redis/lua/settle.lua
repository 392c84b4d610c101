-- End claims: CLAIMED -> ARGV[2] (enqueued, scheduled or expired), for each id still held
-- under its own claim token (claims from different lock leases can be settled together).
-- KEYS: 1 claim leases, 2 claimed-state index, 3 index of the target state, 4 (a finished
--       target only) its finished index, by finish time, which retention purges from
-- ARGV: 1 job key prefix, 2 target state, 3 '1' to set last_error to ARGV[4] else '0',
--       4 error text, then id, token per claim
-- Returns the ids that were settled. Three calls per job; the indexes once per slice.
local at = fmt(now())
local back_to_schedule = ARGV[2] == 'scheduled'
local settled, target_index, finished_index = {}, {}, {}
for i = 5, #ARGV, 2 do
  local id = ARGV[i]
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'state', 'claim_token', 'due_at')
  if job[1] == 'claimed' and job[2] == ARGV[i + 1] then
    if ARGV[3] == '1' then
      redis.call('HSET', key, 'state', ARGV[2], 'updated_at', at, 'last_error', ARGV[4])
    else
      redis.call('HSET', key, 'state', ARGV[2], 'updated_at', at)
    end
    if back_to_schedule then
      redis.call('HDEL', key, 'lease_until', 'claim_token')
    else  -- a job that ended needs its broker message no more
      redis.call('HDEL', key, 'lease_until', 'envelope')
    end
    settled[#settled + 1] = id
    add_member(target_index, job[3], id)
    add_member(finished_index, at, id)
  end
end
call_in_slices('ZREM', KEYS[1], settled)
call_in_slices('ZREM', KEYS[2], settled)
call_in_slices('ZADD', KEYS[3], target_index)
if KEYS[4] then
  call_in_slices('ZADD', KEYS[4], finished_index)
end
return settled
