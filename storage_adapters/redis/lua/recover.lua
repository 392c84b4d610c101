-- Make up to ARGV[2] jobs whose claim lease ran out SCHEDULED again, due at their old time.
-- KEYS: 1 claim leases, 2 claimed-state index, 3 schedule
-- ARGV: 1 job key prefix, 2 limit, 3 last_error text
-- Returns how many jobs were recovered.
local at = now()
local stamp = fmt(at)
-- A claim is live up to and including its lease_until, as in the SQL adapters.
local ids = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. stamp, 'BYSCORE', 'LIMIT', 0, ARGV[2])
local recovered = 0
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'state', 'due_at')
  if job[1] == 'claimed' then
    redis.call('HSET', key, 'state', 'scheduled', 'updated_at', stamp, 'last_error', ARGV[3])
    redis.call('HDEL', key, 'lease_until', 'claim_token')
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZADD', KEYS[3], job[2], id)
    recovered = recovered + 1
  end
  redis.call('ZREM', KEYS[1], id)
end
return recovered
