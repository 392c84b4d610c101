-- Move a SCHEDULED or HELD job's due time in its hash and in both indexes that sort by it; a
-- FAILED job becomes SCHEDULED again at that time, its attempts counted afresh. Whichever it
-- was, it ends HELD (in the held set) when a pause holds it, else SCHEDULED (in the due set).
-- A FAILED unique job takes its key back, unless another live (scheduled, held or claimed) job
-- holds it meanwhile: then nothing changes and the reply is the error 'UNIQUE_HELD <key>'.
-- KEYS: 1 schedule, 2 all-jobs index, 3 failed-state index, 4 pauses, 5 held set, 6 unique keys
-- ARGV: 1 job key prefix, 2 job id, 3 new due_at
-- Returns 1 if moved, 0 if the job is missing or neither scheduled, held nor failed.
local id = ARGV[2]
local key = ARGV[1] .. id
local job = redis.call('HMGET', key, 'state', 'task', 'queue', 'unique_key')
local state = job[1]
if state ~= 'scheduled' and state ~= 'held' and state ~= 'failed' then
  return 0
end
if state == 'failed' and job[4] then
  local field = job[2] .. '\n' .. job[4]
  local holder = redis.call('HGET', KEYS[6], field)
  if holder and holder ~= id then
    local held_by = redis.call('HGET', ARGV[1] .. holder, 'state')
    if held_by == 'scheduled' or held_by == 'held' or held_by == 'claimed' then
      return redis.error_reply('UNIQUE_HELD ' .. job[4])
    end
  end
  redis.call('HSET', KEYS[6], field, id)
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
