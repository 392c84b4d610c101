-- Fire a recurring job: store its firing jobs and move it on, all or nothing, only while the
-- lock lease is current and the recurring job is still at the version the firing was computed
-- from (the compare-and-set that makes two racing firings of one tick succeed once).
-- KEYS: 1 lock, 2 recurring job, 3 recurring due index, 4 all-jobs index, 5 schedule
-- ARGV: 1 lock owner, 2 lock token, 3 expected version, 4 recurring id,
--       5 next_run_at ('' for none), 6 last_run_at ('' for none), 7 history,
--       8 job key prefix, then id, task, payload, due_at, envelope per firing job (as in add_jobs)
-- Returns 1 (stored) or 0 (existed) per job, or nil, having written nothing, when the lease or
-- the version is stale (a missing recurring job has no version, so it is stale too).
local at = now()
if not lock_is_current(KEYS[1], ARGV[1], ARGV[2], at) then
  return nil
end
local current = redis.call('HMGET', KEYS[2], 'version', 'enabled')
if current[1] ~= ARGV[3] then
  return nil
end
local stamp = fmt(at)
local job_keys = {KEYS[4], KEYS[5]}
local stored = {}
for i = 9, #ARGV, 5 do
  stored[#stored + 1] = add_job(job_keys, ARGV[8], ARGV[i], ARGV[i + 1], ARGV[i + 2],
    ARGV[i + 3], ARGV[i + 4], stamp)
end
redis.call('HSET', KEYS[2], 'next_run_at', ARGV[5], 'last_run_at', ARGV[6],
  'history', ARGV[7], 'updated_at', stamp)
redis.call('HINCRBY', KEYS[2], 'version', 1)
index_recurring_due(KEYS[3], ARGV[4], current[2], ARGV[5])
return stored
