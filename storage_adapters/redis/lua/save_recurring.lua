-- Create or replace a chunk of recurring jobs, as the mode allows, all or nothing.
-- KEYS: 1 recurring ids index, 2 recurring due index
-- ARGV: 1 mode (create, update or upsert), 2 recurring key prefix, then per recurring job:
--       id, task, payload, schedule, enabled ('1' or '0'), next_run_at ('' for none)
-- Returns 1 (created) or 0 (replaced) per job. A mode that forbids a write is an error reply
-- (RECURRING_EXISTS or RECURRING_MISSING, then the first offending ids) given before anything
-- is written.
local mode, prefix = ARGV[1], ARGV[2]
local created, refused = {}, {}
for i = 3, #ARGV, 6 do
  local exists = redis.call('EXISTS', prefix .. ARGV[i]) == 1
  if (exists and mode == 'create') or (not exists and mode == 'update') then
    refused[#refused + 1] = ARGV[i]
  end
  created[#created + 1] = exists and 0 or 1
end
if #refused > 0 then
  local reason = mode == 'create' and 'RECURRING_EXISTS ' or 'RECURRING_MISSING '
  return redis.error_reply(reason .. table.concat(refused, ' ', 1, math.min(#refused, 5)))
end
local stamp = fmt(now())
local n = 0
for i = 3, #ARGV, 6 do
  n = n + 1
  local key = prefix .. ARGV[i]
  redis.call('HSET', key, 'task', ARGV[i + 1], 'payload', ARGV[i + 2], 'schedule', ARGV[i + 3],
    'enabled', ARGV[i + 4], 'next_run_at', ARGV[i + 5], 'updated_at', stamp)
  index_recurring_due(KEYS[2], ARGV[i], ARGV[i + 4], ARGV[i + 5])
  if ARGV[i + 4] == '1' then  -- enabled: no pause, so no note, who or since
    redis.call('HDEL', key, 'pause_note', 'paused_by', 'paused_at')
  end
  if created[n] == 0 then
    -- An update keeps last_run_at, history and created_at: they describe firings already made.
    redis.call('HINCRBY', key, 'version', 1)
  else
    redis.call('HSET', key, 'last_run_at', '', 'history', '[]', 'version', 1,
      'created_at', stamp)
    redis.call('ZADD', KEYS[1], 0, ARGV[i])
  end
end
return created
