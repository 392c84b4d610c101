-- Store new jobs; an id that exists in any state is left untouched (idempotent accept). A job a
-- pause holds (its task's, or its queue's) is stored HELD, in the held set, instead of due.
-- KEYS: 1 all-jobs index, 2 schedule (due set), 3 pauses, 4 held set
-- ARGV: 1 job key prefix, then id, task, payload, due_at, envelope, queue ('' for none) per job
-- Returns 1 (stored) or 0 (existed) per job. Redis refuses an out-of-memory script only at its
-- first write, never midway, so a batch is never half stored.
-- Stores a job as add_job (_common.lua) does, which the recurring firings use for one job; here
-- the index writes go as one ZADD per 1,000 jobs instead of two per job, and the hash in one
-- HSET: the commands a script issues are most of its cost.
local stored, members, due_members, held_members = {}, {}, {}, {}
local stamp = fmt(now())
local prefix = ARGV[1]
local paused = pauses_in_force(KEYS[3])
for i = 2, #ARGV, 6 do
  local id, task, due, envelope, queue = ARGV[i], ARGV[i + 1], ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5]
  local key = prefix .. id
  if redis.call('EXISTS', key) == 1 then
    stored[#stored + 1] = 0
  else
    local held = paused and is_held(paused, task, queue)
    local fields = {'task', task, 'payload', ARGV[i + 2], 'due_at', due,
      'state', held and 'held' or 'scheduled', 'attempts', 0, 'created_at', stamp,
      'updated_at', stamp}
    if envelope ~= '' then
      fields[15], fields[16] = 'envelope', envelope
    end
    if queue ~= '' then
      local n = #fields
      fields[n + 1], fields[n + 2] = 'queue', queue
    end
    redis.call('HSET', key, unpack(fields))
    add_member(members, due, id)
    if paused then  -- else every new job is due: the due set takes `members` as it is
      add_member(held and held_members or due_members, due, id)
    end
    stored[#stored + 1] = 1
  end
end
call_in_slices('ZADD', KEYS[1], members)
call_in_slices('ZADD', KEYS[2], paused and due_members or members)
call_in_slices('ZADD', KEYS[4], held_members)
return stored
