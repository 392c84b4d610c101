-- Store a batch of execution outcomes (redis/outcomes.py): each event is a field of its job's
-- hash `oc:<job id>`, named `<at>|<state>` and written only if absent (a batch sent twice stores
-- nothing twice); a new final event also joins the newest-outcomes indexes and the counts.
-- KEYS: 1 index of every final outcome, 2 counts per state and task (hash `<state>\n<task>`)
-- ARGV: 1 key prefix ('{prefix}:'), then per event: job id, state, at, task, fields as JSON,
--       final ('1' or '0')
-- Returns how many events were new.
local added = 0
for i = 2, #ARGV, 6 do
  local id, state, at, task, value, final =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  if redis.call('HSETNX', ARGV[1] .. 'oc:' .. id, at .. '|' .. state, value) == 1 then
    added = added + 1
    if final == '1' then
      local member = id .. '\n' .. state .. '\n' .. at
      redis.call('ZADD', KEYS[1], at, member)
      redis.call('ZADD', ARGV[1] .. 'outcomes:' .. state, at, member)
      redis.call('HINCRBY', KEYS[2], state .. '\n' .. task, 1)
    end
  end
end
return added
