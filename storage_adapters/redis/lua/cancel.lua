-- SCHEDULED or HELD -> CANCELLED.
-- KEYS: 1 schedule, 2 cancelled-state index, 3 cancelled finished index (by finish time),
--       4 held set
-- ARGV: 1 job key prefix, 2 job id
-- Returns 1 if cancelled, 0 if the job is missing or neither scheduled nor held.
local key = ARGV[1] .. ARGV[2]
local job = redis.call('HMGET', key, 'state', 'due_at')
if job[1] ~= 'scheduled' and job[1] ~= 'held' then
  return 0
end
local at = fmt(now())
redis.call('HSET', key, 'state', 'cancelled', 'updated_at', at)
redis.call('ZREM', job[1] == 'held' and KEYS[4] or KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], job[2], ARGV[2])
redis.call('ZADD', KEYS[3], at, ARGV[2])
return 1
