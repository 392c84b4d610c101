-- Pause or resume a recurring job and set its next run, bumping its version.
-- KEYS: 1 recurring job, 2 recurring due index
-- ARGV: 1 id, 2 enabled ('1' or '0'), 3 next_run_at ('' for none)
-- Returns 1, or 0 if the recurring job is missing.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'enabled', ARGV[2], 'next_run_at', ARGV[3],
  'updated_at', fmt(now()))
redis.call('HINCRBY', KEYS[1], 'version', 1)
index_recurring_due(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return 1
