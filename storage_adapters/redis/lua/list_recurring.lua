-- One page of recurring jobs in id order (every score is 0, so ranks follow the ids), as one
-- snapshot.
-- KEYS: 1 recurring ids index
-- ARGV: 1 recurring job key prefix, 2 first rank, 3 last rank
return recurring_rows(ARGV[1], redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3]))
