-- Due recurring jobs (enabled, next_run_at <= now), earliest first, ties by id, as full rows;
-- a script so that "now" is the server's clock and the rows are one snapshot.
-- KEYS: 1 recurring due index
-- ARGV: 1 recurring job key prefix, 2 limit
local ids = redis.call('ZRANGE', KEYS[1], '-inf', fmt(now()), 'BYSCORE', 'LIMIT', 0, ARGV[2])
return recurring_rows(ARGV[1], ids)
