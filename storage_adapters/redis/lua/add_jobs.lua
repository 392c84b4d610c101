-- Store new jobs; an id that exists in any state is left untouched (idempotent accept).
-- KEYS: 1 all-jobs index, 2 schedule (due set)
-- ARGV: 1 job key prefix, then id, task, payload, due_at, envelope ('' for none) per job
-- Returns 1 (stored) or 0 (existed) per job. Redis refuses an out-of-memory script only at its
-- first write, never midway, so a batch is never half stored.
-- Stores a job as add_job (_common.lua) does, which fire_recurring uses for one job; here the two
-- index writes go as one ZADD per 1,000 jobs instead of two per job, and the hash in one HSET:
-- the commands a script issues are most of its cost.
local stored, members = {}, {}
local stamp = fmt(now())
local prefix = ARGV[1]
for i = 2, #ARGV, 5 do
  local id, due, envelope = ARGV[i], ARGV[i + 3], ARGV[i + 4]
  local key = prefix .. id
  if redis.call('EXISTS', key) == 1 then
    stored[#stored + 1] = 0
  else
    if envelope ~= '' then
      redis.call('HSET', key, 'task', ARGV[i + 1], 'payload', ARGV[i + 2], 'due_at', due,
        'state', 'scheduled', 'attempts', 0, 'created_at', stamp, 'updated_at', stamp,
        'envelope', envelope)
    else
      redis.call('HSET', key, 'task', ARGV[i + 1], 'payload', ARGV[i + 2], 'due_at', due,
        'state', 'scheduled', 'attempts', 0, 'created_at', stamp, 'updated_at', stamp)
    end
    add_member(members, due, id)
    stored[#stored + 1] = 1
  end
end
call_in_slices('ZADD', KEYS[1], members)
call_in_slices('ZADD', KEYS[2], members)
return stored
