-- Store new jobs; an id that exists in any state is left untouched (idempotent accept).
-- KEYS: 1 all-jobs index, 2 schedule (due set)
-- ARGV: 1 job key prefix, then id, task, payload, due_at per job
-- Returns 1 (stored) or 0 (existed) per job. The first write happens only after every EXISTS,
-- and Redis refuses an out-of-memory script only before its first write, so a batch is never
-- half stored.
local job_prefix = ARGV[1]
local stored = {}
local at = fmt(now())
for i = 2, #ARGV, 4 do
  local id, due = ARGV[i], ARGV[i + 3]
  local key = job_prefix .. id
  if redis.call('EXISTS', key) == 1 then
    stored[#stored + 1] = 0
  else
    redis.call('HSET', key, 'task', ARGV[i + 1], 'payload', ARGV[i + 2], 'due_at', due,
      'state', 'scheduled', 'attempts', 0, 'created_at', at, 'updated_at', at)
    redis.call('ZADD', KEYS[1], due, id)
    redis.call('ZADD', KEYS[2], due, id)
    stored[#stored + 1] = 1
  end
end
return stored
