-- Store one unique job unless its id exists (idempotent accept) or a live job of its task holds
-- its key; "replace" moves a scheduled or held holder to the new job's time and payload.
-- KEYS: 1 all-jobs index, 2 schedule, 3 pauses, 4 held set, 5 unique keys (hash: field
--       '<task>\n<key>' -> holder id)
-- ARGV: 1 job key prefix, 2 on_conflict ('keep' or 'replace'), then id, task, payload, due_at,
--       envelope, queue ('' for none), unique_key
-- Returns {job id holding the key, created (1/0), replaced (1/0)}. Lazy: a field naming a job
-- that is gone or no longer scheduled, held or claimed is free, and simply overwritten, so the
-- scripts that finish jobs need not touch the key.
local prefix, conflict = ARGV[1], ARGV[2]
local id, task, payload, due, envelope, queue, unique = ARGV[3], ARGV[4], ARGV[5], ARGV[6],
  ARGV[7], ARGV[8], ARGV[9]
if redis.call('EXISTS', prefix .. id) == 1 then
  return {id, 0, 0}
end
local field = task .. '\n' .. unique
local holder = redis.call('HGET', KEYS[5], field)
local state = holder and redis.call('HGET', prefix .. holder, 'state')
if state == 'claimed' or (state and conflict == 'keep'
    and (state == 'scheduled' or state == 'held')) then
  return {holder, 0, 0}
end
local paused = pauses_in_force(KEYS[3])
if state == 'scheduled' or state == 'held' then  -- replace the holder's time and payload
  local key = prefix .. holder
  local target = is_held(paused, task, queue) and 'held' or 'scheduled'
  redis.call('HSET', key, 'due_at', due, 'payload', payload, 'state', target,
    'updated_at', fmt(now()))
  if envelope ~= '' then
    redis.call('HSET', key, 'envelope', envelope)
  else
    redis.call('HDEL', key, 'envelope')
  end
  if queue ~= '' then
    redis.call('HSET', key, 'queue', queue)
  else
    redis.call('HDEL', key, 'queue')
  end
  redis.call('ZREM', target == 'held' and KEYS[2] or KEYS[4], holder)
  redis.call('ZADD', target == 'held' and KEYS[4] or KEYS[2], due, holder)
  redis.call('ZADD', KEYS[1], due, holder)
  return {holder, 0, 1}
end
add_job({KEYS[1], KEYS[2], KEYS[4]}, paused, prefix, id, task, payload, due, envelope, queue,
  fmt(now()))
redis.call('HSET', prefix .. id, 'unique_key', unique)
redis.call('HSET', KEYS[5], field, id)
return {id, 1, 0}
