-- Make up to ARGV[2] jobs whose claim lease ran out SCHEDULED again, due at their old time
-- (HELD instead, in the held set, when a pause holds them).
-- KEYS: 1 claim leases, 2 claimed-state index, 3 schedule, 4 pauses, 5 held set
-- ARGV: 1 job key prefix, 2 limit, 3 last_error text
-- Returns how many jobs were recovered.
local at = now()
local stamp = fmt(at)
local paused = pauses_in_force(KEYS[4])
-- A claim is live up to and including its lease_until, as in the SQL adapters.
local ids = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. stamp, 'BYSCORE', 'LIMIT', 0, ARGV[2])
local recovered = 0
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'state', 'due_at', 'task', 'queue')
  if job[1] == 'claimed' then
    local held = is_held(paused, job[3], job[4])
    redis.call('HSET', key, 'state', held and 'held' or 'scheduled', 'updated_at', stamp,
      'last_error', ARGV[3])
    redis.call('HDEL', key, 'lease_until', 'claim_token')
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZADD', held and KEYS[5] or KEYS[3], job[2], id)
    recovered = recovered + 1
  end
  redis.call('ZREM', KEYS[1], id)
end
return recovered
