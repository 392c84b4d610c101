-- Extend the lease from now, only for the current, unexpired holder.
-- KEYS: 1 lock
-- ARGV: 1 owner, 2 token, 3 lease seconds
-- Returns the new expires_at, or nil.
local at = now()
if not lock_is_current(KEYS[1], ARGV[1], ARGV[2], at) then
  return nil
end
local lease = tonumber(ARGV[3])
local expires_at = fmt(at + lease)
redis.call('HSET', KEYS[1], 'expires_at', expires_at)
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(lease * 1000)))
return expires_at
