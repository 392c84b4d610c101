-- Claim one job if it is scheduled and due and the lock lease is current; a due job a pause
-- holds (its pause's sweep has not reached it yet) is moved to the held set instead.
-- KEYS: 1 lock, 2 schedule, 3 claim leases, 4 claimed-state index, 5 pauses, 6 held set
-- ARGV: 1 job key prefix, 2 lock owner, 3 lock token, 4 lease seconds, 5 job id
-- Returns {id, task, payload, due_at, attempts, envelope, queue, slot_at} ('' for none of the
-- last three), or {} when nothing was claimed.
local at = now()
if not lock_is_current(KEYS[1], ARGV[2], ARGV[3], at) then
  return {}
end
local id = ARGV[5]
local due = redis.call('ZSCORE', KEYS[2], id)
if not due or tonumber(due) > at then
  return {}
end
local key = ARGV[1] .. id
local job = redis.call('HMGET', key, 'task', 'payload', 'due_at', 'state', 'envelope', 'queue',
  'slot_at')
redis.call('ZREM', KEYS[2], id)
if job[4] ~= 'scheduled' then
  -- Cannot happen while every write goes through these scripts; heal rather than spin on it.
  return {}
end
local stamp = fmt(at)
if is_held(pauses_in_force(KEYS[5]), job[1], job[6]) then
  hold_found(KEYS[6], ARGV[1], {id}, {job[3]}, stamp)
  return {}
end
local lease_until = fmt(at + tonumber(ARGV[4]))
local attempts = redis.call('HINCRBY', key, 'attempts', 1)
redis.call('HSET', key, 'state', 'claimed', 'claim_token', ARGV[3], 'lease_until', lease_until,
  'updated_at', stamp)
redis.call('ZADD', KEYS[3], lease_until, id)
redis.call('ZADD', KEYS[4], job[3], id)
return {id, job[1], job[2], job[3], attempts, job[5] or '', job[6] or '', job[7] or ''}
