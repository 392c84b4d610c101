-- Create or replace one scheduler instance's record, stamped with the server's clock.
-- KEYS: 1 inst:<id> (hash), 2 instances (every id by heartbeat time)
-- ARGV: id, host, pid, version, started_at, details
-- Returns the heartbeat time.
local at = fmt(now())
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'host', ARGV[2], 'pid', ARGV[3], 'version', ARGV[4],
  'started_at', ARGV[5], 'heartbeat_at', at, 'details', ARGV[6])
redis.call('ZADD', KEYS[2], at, ARGV[1])
return at
