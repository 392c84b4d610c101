-- Move a SCHEDULED job's due time in its hash and in both indexes that sort by it; a FAILED job
-- becomes SCHEDULED again at that time, its attempts counted afresh.
-- KEYS: 1 schedule, 2 all-jobs index, 3 failed-state index
-- ARGV: 1 job key prefix, 2 job id, 3 new due_at
-- Returns 1 if moved, 0 if the job is missing or neither scheduled nor failed.
local key = ARGV[1] .. ARGV[2]
local state = redis.call('HGET', key, 'state')
if state == 'failed' then
  redis.call('HSET', key, 'state', 'scheduled', 'attempts', 0, 'updated_at', fmt(now()))
  redis.call('ZREM', KEYS[3], ARGV[2])
elseif state ~= 'scheduled' then
  return 0
end
redis.call('HSET', key, 'due_at', ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
return 1
