-- Stamp a registered instance's heartbeat with the server's clock and replace its details.
-- KEYS: 1 inst:<id> (hash), 2 instances (every id by heartbeat time)
-- ARGV: id, details
-- Returns the heartbeat time, or false when the record is gone (nothing is written then).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local at = fmt(now())
redis.call('HSET', KEYS[1], 'heartbeat_at', at, 'details', ARGV[2])
redis.call('ZADD', KEYS[2], at, ARGV[1])
return at
