-- Pause or resume a recurring job and set its next run, bumping its version. A pause keeps its
-- note, who and since when (kept if it was paused already); a resume deletes them.
-- KEYS: 1 recurring job, 2 recurring due index
-- ARGV: 1 id, 2 enabled ('1' or '0'), 3 next_run_at ('' for none), 4 note, 5 paused_by,
--       6 the version it must still have ('' for any)
-- Returns 1, or 0 if the recurring job is missing or its version is not ARGV[6].
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[6] ~= '' and redis.call('HGET', KEYS[1], 'version') ~= ARGV[6] then
  return 0
end
local stamp = fmt(now())
if ARGV[2] == '1' then
  redis.call('HDEL', KEYS[1], 'pause_note', 'paused_by', 'paused_at')
else
  local since = redis.call('HGET', KEYS[1], 'paused_at')
  if redis.call('HGET', KEYS[1], 'enabled') ~= '0' or not since then
    since = stamp
  end
  redis.call('HSET', KEYS[1], 'pause_note', ARGV[4], 'paused_by', ARGV[5], 'paused_at', since)
end
redis.call('HSET', KEYS[1], 'enabled', ARGV[2], 'next_run_at', ARGV[3], 'updated_at', stamp)
redis.call('HINCRBY', KEYS[1], 'version', 1)
index_recurring_due(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return 1
