-- Record a manual trigger of a recurring job: store its one firing job (held instead of due when
-- a pause holds it) and set its last run and history, all or nothing, only while the recurring
-- job is still at the version the trigger was computed from. Its next run, and so its due index
-- entry, is left alone: no tick moves.
-- KEYS: 1 recurring job, 2 all-jobs index, 3 schedule, 4 pauses, 5 held set
-- ARGV: 1 expected version, 2 last_run_at, 3 history, 4 job key prefix, then id, task, payload,
--       due_at, envelope, queue of the job (as in add_jobs)
-- Returns 1 (stored) or 0 (existed), or nil, having written nothing, when the version is stale
-- (a missing recurring job has no version, so it is stale too).
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then
  return nil
end
local stamp = fmt(now())
local stored = add_job({KEYS[2], KEYS[3], KEYS[5]}, pauses_in_force(KEYS[4]), ARGV[4], ARGV[5],
  ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], stamp)
redis.call('HSET', KEYS[1], 'last_run_at', ARGV[2], 'history', ARGV[3], 'updated_at', stamp)
redis.call('HINCRBY', KEYS[1], 'version', 1)
return stored
