-- Claim one job if it is scheduled and due and the lock lease is current.
-- KEYS: 1 lock, 2 schedule, 3 claim leases, 4 claimed-state index
-- ARGV: 1 job key prefix, 2 lock owner, 3 lock token, 4 lease seconds, 5 job id
-- Returns {id, task, payload, due_at, attempts, envelope}, or {} when nothing was claimed.
local at = now()
if not lock_is_current(KEYS[1], ARGV[2], ARGV[3], at) then
  return {}
end
local due = redis.call('ZSCORE', KEYS[2], ARGV[5])
if not due or tonumber(due) > at then
  return {}
end
local claimed = claim_one({KEYS[2], KEYS[3], KEYS[4]}, ARGV[1], ARGV[5], ARGV[3], at,
  at + tonumber(ARGV[4]))
return claimed or {}
