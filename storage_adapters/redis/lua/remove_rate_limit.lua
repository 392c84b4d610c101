-- End a rate limit (jobs already deferred to a reserved slot keep that due time).
-- KEYS: 1 limits
-- ARGV: 1 field ('queue:<name>' or 'task:<name>')
-- Returns 1 if it was in force, else 0.
return redis.call('HDEL', KEYS[1], ARGV[1])
