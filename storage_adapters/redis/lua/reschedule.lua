-- Move a SCHEDULED or HELD job's due time in its hash and in both indexes that sort by it; a
-- FAILED job becomes SCHEDULED again at that time, its attempts counted afresh. Whichever it
-- was, it ends HELD (in the held set) when a pause holds it, else SCHEDULED (in the due set).
-- KEYS: 1 schedule, 2 all-jobs index, 3 failed-state index, 4 pauses, 5 held set
-- ARGV: 1 job key prefix, 2 job id, 3 new due_at
-- Returns 1 if moved, 0 if the job is missing or neither scheduled, held nor failed.
local id = ARGV[2]
local key = ARGV[1] .. id
local job = redis.call('HMGET', key, 'state', 'task', 'queue')
local state = job[1]
if state ~= 'scheduled' and state ~= 'held' and state ~= 'failed' then
  return 0
end
local target = is_held(pauses_in_force(KEYS[4]), job[2], job[3]) and 'held' or 'scheduled'
if state == 'failed' then
  redis.call('HSET', key, 'state', target, 'attempts', 0, 'updated_at', fmt(now()))
  redis.call('ZREM', KEYS[3], id)
elseif state ~= target then
  redis.call('HSET', key, 'state', target, 'updated_at', fmt(now()))
end
redis.call('HSET', key, 'due_at', ARGV[3])
redis.call('ZREM', target == 'held' and KEYS[1] or KEYS[5], id)
redis.call('ZADD', target == 'held' and KEYS[5] or KEYS[1], ARGV[3], id)
redis.call('ZADD', KEYS[2], ARGV[3], id)
return 1
