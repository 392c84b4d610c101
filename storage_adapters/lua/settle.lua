-- End claims: CLAIMED -> ARGV[2] (enqueued, scheduled or expired), for each id still held
-- under its own claim token (claims from different lock leases can be settled together).
-- KEYS: 1 claim leases, 2 claimed-state index, 3 index of the target state
-- ARGV: 1 job key prefix, 2 target state, 3 '1' to set last_error to ARGV[4] else '0',
--       4 error text, then id, token per claim
-- Returns the ids that were settled.
local at = fmt(now())
local settled = {}
for i = 5, #ARGV, 2 do
  local id = ARGV[i]
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'state', 'claim_token', 'due_at')
  if job[1] == 'claimed' and job[2] == ARGV[i + 1] then
    redis.call('HSET', key, 'state', ARGV[2], 'updated_at', at)
    redis.call('HDEL', key, 'lease_until')
    if ARGV[2] == 'scheduled' then
      redis.call('HDEL', key, 'claim_token')
    end
    if ARGV[3] == '1' then
      redis.call('HSET', key, 'last_error', ARGV[4])
    end
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZADD', KEYS[3], job[3], id)
    settled[#settled + 1] = id
  end
end
return settled
