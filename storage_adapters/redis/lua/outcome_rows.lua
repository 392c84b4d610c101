-- Every stored outcome of each job asked (redis/outcomes.py), in one snapshot.
-- KEYS: 1 the outcomes index, only to route the script to this prefix's slot (each job's hash
--       is ARGV[1] .. 'oc:' .. id, in that slot)
-- ARGV: 1 key prefix ('{prefix}:'), then the job ids
-- Returns per id the flat HGETALL of its hash (field `<at>|<state>`, value the fields as JSON).
local rows = {}
for i = 2, #ARGV do
  rows[#rows + 1] = redis.call('HGETALL', ARGV[1] .. 'oc:' .. ARGV[i])
end
return rows
