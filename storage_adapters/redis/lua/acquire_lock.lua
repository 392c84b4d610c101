-- Take a lock that is free or whose lease ran out; every acquisition gets a new fencing token.
-- KEYS: 1 lock, 2 fencing counter
-- ARGV: 1 owner, 2 lease seconds
-- Returns {token, expires_at}, or nil while another lease is current.
local at = now()
local expires = redis.call('HGET', KEYS[1], 'expires_at')
if expires and tonumber(expires) > at then
  return nil
end
local token = redis.call('INCR', KEYS[2])
local lease = tonumber(ARGV[2])
local expires_at = fmt(at + lease)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'expires_at', expires_at)
-- The key's TTL only collects garbage; expires_at decides, so the TTL may run a little longer.
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(lease * 1000)))
return {token, expires_at}
