-- Backfill one slice of a finished index from a state index, for jobs that finished before the
-- finished indexes existed (ZADD NX: a job already indexed keeps its finish time).
-- KEYS: 1 state index (by due time), 2 that state's finished index (by finish time)
-- ARGV: 1 job key prefix, 2 first rank, 3 slice size
-- Returns how many ids the slice held (fewer than the slice size: the state index is done).
local ids = redis.call('ZRANGE', KEYS[1], ARGV[2], tonumber(ARGV[2]) + tonumber(ARGV[3]) - 1)
local members = {}
for _, id in ipairs(ids) do
  local finished = redis.call('HGET', ARGV[1] .. id, 'updated_at')
  if finished then
    add_member(members, finished, id)
  end
end
if #members > 0 then
  redis.call('ZADD', KEYS[2], 'NX', unpack(members))
end
return #ids
