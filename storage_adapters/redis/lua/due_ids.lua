-- Ids of due jobs, earliest first; a script only so that "now" is the server's clock.
-- KEYS: 1 schedule
-- ARGV: 1 limit
return redis.call('ZRANGE', KEYS[1], '-inf', fmt(now()), 'BYSCORE', 'LIMIT', 0, ARGV[1])
