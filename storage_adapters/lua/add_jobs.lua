-- Store new jobs; an id that exists in any state is left untouched (idempotent accept).
-- KEYS: 1 all-jobs index, 2 schedule (due set)
-- ARGV: 1 job key prefix, then id, task, payload, due_at, envelope ('' for none) per job
-- Returns 1 (stored) or 0 (existed) per job. Redis refuses an out-of-memory script only at its
-- first write, never midway, so a batch is never half stored.
local stored = {}
local stamp = fmt(now())
for i = 2, #ARGV, 5 do
  stored[#stored + 1] = add_job(KEYS, ARGV[1], ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
    ARGV[i + 4], stamp)
end
return stored
