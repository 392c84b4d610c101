-- One page of an index (sorted by due_at, then id) with each job's fields, as one snapshot.
-- KEYS: 1 index (all jobs, or one state)
-- ARGV: 1 job key prefix, 2 first rank, 3 last rank
-- Returns {id, task, payload, due_at, state, attempts, created_at, updated_at, last_error} rows.
return hash_rows(ARGV[1], redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3]), {'task', 'payload',
  'due_at', 'state', 'attempts', 'created_at', 'updated_at', 'last_error'})
