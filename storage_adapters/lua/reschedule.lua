-- Move a SCHEDULED job's due time in its hash and in both indexes that sort by it.
-- KEYS: 1 schedule, 2 all-jobs index
-- ARGV: 1 job key prefix, 2 job id, 3 new due_at
-- Returns 1 if moved, 0 if the job is missing or not scheduled.
local key = ARGV[1] .. ARGV[2]
if redis.call('HGET', key, 'state') ~= 'scheduled' then
  return 0
end
redis.call('HSET', key, 'due_at', ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
return 1
