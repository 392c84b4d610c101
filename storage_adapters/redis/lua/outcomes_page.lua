-- One page of final outcomes, newest first by (at, job id) (redis/outcomes.py): a walk down an
-- index scored by `at` (members `<job id>\n<state>\n<at>`, so ties read in job id order,
-- highest first), from strictly before (before_at, before_id), keeping members of one task if
-- asked, examining at most `budget` members.
-- KEYS: 1 the index (every final outcome, or one state's)
-- ARGV: 1 key prefix ('{prefix}:'), 2 before_at ('' from the newest), 3 before_id, 4 task ('' any),
--       5 rows wanted, 6 budget
-- Returns {more (1: the budget ran out first), last member examined, rows}, each row
-- {member, fields as JSON}.
local before_at, before_id, task = ARGV[2], ARGV[3], ARGV[4]
local wanted, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
local top = before_at == '' and '+inf' or before_at
local rows, examined, offset, last = {}, 0, 0, ''
while #rows < wanted and examined < budget do
  local slice = redis.call('ZRANGE', KEYS[1], top, '-inf', 'BYSCORE', 'REV', 'LIMIT', offset,
    math.min(200, budget - examined))
  if #slice == 0 then
    return {0, last, rows}
  end
  offset = offset + #slice
  for _, member in ipairs(slice) do
    examined = examined + 1
    last = member
    local id, state, at = string.match(member, '^(.-)\n(.-)\n(.*)$')
    local keep = true
    if before_at ~= '' and tonumber(at) == tonumber(before_at) and id >= before_id then
      keep = false
    end
    local value = nil
    if keep then
      value = redis.call('HGET', ARGV[1] .. 'oc:' .. id, at .. '|' .. state)
      keep = value ~= false
    end
    if keep and task ~= '' then
      keep = cjson.decode(value)['task'] == task
    end
    if keep then
      rows[#rows + 1] = {member, value}
      if #rows >= wanted then
        return {0, last, rows}
      end
    end
  end
end
return {#rows < wanted and 1 or 0, last, rows}
