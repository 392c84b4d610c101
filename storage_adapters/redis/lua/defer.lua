-- Claimed jobs that must wait for their rate limit (RateLimitStore.defer): CLAIMED ->
-- SCHEDULED due at their own reserved slot (HELD instead, in the held set, when a pause holds
-- them, as settle.lua decides), with ARGV[2] as last_error and the claim's attempt uncounted
-- (waiting is no failed send), for each id still held under its own claim token. The slot is
-- kept as slot_at too: claimed again while its due time is still that slot, the job holds it and
-- is sent without reserving another. The envelope is kept: the job is sent as it was.
-- KEYS: 1 claim leases, 2 claimed-state index, 3 schedule, 4 all-jobs index, 5 pauses,
--       6 held set
-- ARGV: 1 job key prefix, 2 note, then id, token, due_at per claim
-- Returns the ids that were settled. Two calls per job; the indexes once per slice.
local at = fmt(now())
local paused = pauses_in_force(KEYS[5])
local settled, due_index, held_index, all_index = {}, {}, {}, {}
for i = 3, #ARGV, 3 do
  local id, due = ARGV[i], ARGV[i + 2]
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'state', 'claim_token', 'attempts', 'task', 'queue')
  if job[1] == 'claimed' and job[2] == ARGV[i + 1] then
    local held = paused and is_held(paused, job[4], job[5])
    local attempts = math.max(tonumber(job[3] or '0') - 1, 0)
    redis.call('HSET', key, 'state', held and 'held' or 'scheduled', 'due_at', due,
      'slot_at', due, 'attempts', attempts, 'updated_at', at, 'last_error', ARGV[2])
    redis.call('HDEL', key, 'lease_until', 'claim_token')
    settled[#settled + 1] = id
    add_member(held and held_index or due_index, due, id)
    add_member(all_index, due, id)
  end
end
call_in_slices('ZREM', KEYS[1], settled)
call_in_slices('ZREM', KEYS[2], settled)
call_in_slices('ZADD', KEYS[3], due_index)
call_in_slices('ZADD', KEYS[6], held_index)
call_in_slices('ZADD', KEYS[4], all_index)
return settled
