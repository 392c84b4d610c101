-- Due recurring jobs (enabled, next_run_at <= now, or <= the given instant), earliest first,
-- ties by id, as full rows; a script so that "now" is the server's clock and the rows are one
-- snapshot.
-- KEYS: 1 recurring due index
-- ARGV: 1 recurring job key prefix, 2 limit, 3 offset, 4 (optional) until, epoch seconds
local upto = ARGV[4] or fmt(now())
local ids = redis.call('ZRANGE', KEYS[1], '-inf', upto, 'BYSCORE', 'LIMIT', ARGV[3], ARGV[2])
return recurring_rows(ARGV[1], ids)
