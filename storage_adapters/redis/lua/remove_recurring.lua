-- Delete a recurring job and its index entries; the jobs it already fired stay.
-- KEYS: 1 recurring job, 2 recurring ids index, 3 recurring due index
-- ARGV: 1 id
-- Returns 1 if it existed, else 0.
local removed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return removed
