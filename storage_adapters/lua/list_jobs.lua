-- One page of an index (sorted by due_at, then id) with each job's fields, as one snapshot.
-- KEYS: 1 index (all jobs, or one state)
-- ARGV: 1 job key prefix, 2 first rank, 3 last rank
-- Returns {id, task, payload, due_at, state, attempts, created_at, updated_at, last_error} rows.
local rows = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3])) do
  local job = redis.call('HMGET', ARGV[1] .. id, 'task', 'payload', 'due_at', 'state',
    'attempts', 'created_at', 'updated_at', 'last_error')
  if job[1] then
    table.insert(job, 1, id)
    rows[#rows + 1] = job
  end
end
return rows
