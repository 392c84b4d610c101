-- Create or replace a recurring job, as the mode allows.
-- KEYS: 1 recurring job, 2 recurring ids index, 3 recurring due index
-- ARGV: 1 mode (create, update or upsert), 2 id, 3 task, 4 payload, 5 schedule,
--       6 enabled ('1' or '0'), 7 next_run_at ('' for none)
-- Returns 1 if created, 0 if replaced. A mode that forbids the write is an error reply
-- (RECURRING_EXISTS or RECURRING_MISSING) given before anything is written.
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and ARGV[1] == 'create' then
  return redis.error_reply('RECURRING_EXISTS')
end
if not exists and ARGV[1] == 'update' then
  return redis.error_reply('RECURRING_MISSING')
end
local stamp = fmt(now())
redis.call('HSET', KEYS[1], 'task', ARGV[3], 'payload', ARGV[4], 'schedule', ARGV[5],
  'enabled', ARGV[6], 'next_run_at', ARGV[7], 'updated_at', stamp)
index_recurring_due(KEYS[3], ARGV[2], ARGV[6], ARGV[7])
if exists then
  -- An update keeps last_run_at, history and created_at: they describe firings already made.
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  return 0
end
redis.call('HSET', KEYS[1], 'last_run_at', '', 'history', '[]', 'version', 1,
  'created_at', stamp)
redis.call('ZADD', KEYS[2], 0, ARGV[2])
return 1
