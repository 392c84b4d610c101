-- Fire a chunk of recurring jobs: for each, store its firing jobs and move it on, only while the
-- lock lease is current and the recurring job is still at the version its firing was planned
-- from (the compare-and-set that makes two racing firings of one tick succeed once). One script
-- for the chunk, so it is all written or none of it is.
-- KEYS: 1 lock, 2 recurring due index, 3 all-jobs index, 4 schedule
-- ARGV: 1 lock owner, 2 lock token, 3 recurring key prefix, 4 job key prefix, then per
--       recurring job: id, expected version, next_run_at ('' for none), last_run_at ('' for
--       none), history, job count n, then id, task, payload, due_at, envelope per firing job
-- Returns per recurring job false (stale: nothing written for it; a missing recurring job has no
-- version, so it is stale too) or a string of '1' (stored) and '0' (existed), one per job.
local at = now()
local current_lock = lock_is_current(KEYS[1], ARGV[1], ARGV[2], at)
local stamp = fmt(at)
local job_keys = {KEYS[3], KEYS[4]}
local results = {}
local i = 5
while i <= #ARGV do
  local id, version, next_run_at = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local first_job = i + 6
  local after = first_job + 5 * tonumber(ARGV[i + 5])
  local key = ARGV[3] .. id
  local current = redis.call('HMGET', key, 'version', 'enabled')
  if not current_lock or current[1] ~= version then
    results[#results + 1] = false
  else
    local stored = {}
    for j = first_job, after - 1, 5 do
      stored[#stored + 1] = add_job(job_keys, ARGV[4], ARGV[j], ARGV[j + 1], ARGV[j + 2],
        ARGV[j + 3], ARGV[j + 4], stamp)
    end
    redis.call('HSET', key, 'next_run_at', next_run_at, 'last_run_at', ARGV[i + 3],
      'history', ARGV[i + 4], 'updated_at', stamp)
    redis.call('HINCRBY', key, 'version', 1)
    index_recurring_due(KEYS[2], id, current[2], next_run_at)
    results[#results + 1] = table.concat(stored)
  end
  i = after
end
return results
