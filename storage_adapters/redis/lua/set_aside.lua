-- Claimed jobs that could not be sent: CLAIMED -> SCHEDULED again, due ARGV[3] seconds from now
-- (backed off, on their own; HELD instead, in the held set, when a pause holds them), or, when
-- ARGV[3] is '', -> FAILED (set aside until rescheduled), for each id still held under its own
-- claim token, with ARGV[2] as its last_error.
-- KEYS: 1 claim leases, 2 claimed-state index, 3 schedule, 4 failed-state index, 5 all-jobs
--       index, 6 pauses, 7 held set
-- ARGV: 1 job key prefix, 2 error text, 3 delay seconds or '', then id, token per claim
-- Returns the ids that were settled.
local t = now()
local at = fmt(t)
local to_failed = ARGV[3] == ''
local due = to_failed and '' or fmt(t + tonumber(ARGV[3]))
local paused = not to_failed and pauses_in_force(KEYS[6])
local settled = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'state', 'claim_token', 'due_at', 'task', 'queue')
  if job[1] == 'claimed' and job[2] == ARGV[i + 1] then
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', key, 'lease_until', 'claim_token')
    if to_failed then  -- its broker message is built afresh if it is ever rescheduled
      redis.call('HSET', key, 'state', 'failed', 'updated_at', at, 'last_error', ARGV[2])
      redis.call('HDEL', key, 'envelope')
      redis.call('ZADD', KEYS[4], job[3], id)
    else
      local held = is_held(paused, job[4], job[5])
      redis.call('HSET', key, 'state', held and 'held' or 'scheduled', 'due_at', due,
        'updated_at', at, 'last_error', ARGV[2])
      redis.call('ZADD', held and KEYS[7] or KEYS[3], due, id)
      redis.call('ZADD', KEYS[5], due, id)
    end
    settled[#settled + 1] = id
  end
end
return settled
