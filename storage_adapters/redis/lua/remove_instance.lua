-- Delete one instance's record (a graceful stop).
-- KEYS: 1 inst:<id> (hash), 2 instances (every id by heartbeat time)
-- ARGV: id
-- Returns 1 if it was there, else 0.
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
