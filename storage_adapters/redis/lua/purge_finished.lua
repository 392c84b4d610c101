-- Delete up to ARGV[3] finished jobs whose finish time is before ARGV[2], oldest first, state by
-- state in the order of the KEYS groups; the job's hash and every index it could be in shrink.
-- KEYS: 1 all-jobs index, 2 schedule, 3 claim leases, then per state: its finished index (by
--       finish time), its state index (by due time)
-- ARGV: 1 job key prefix, 2 cutoff (exclusive), 3 limit, then one state name per KEYS group
-- Returns how many hashes were deleted. Bounded: at most `limit` ids are read, whatever is stored.
-- A deleted job's execution outcomes go with it (`oc:<id>`, and its final ones from the outcome
-- indexes and counts: see record_outcomes.lua), under the same key prefix as its hash.
local base = string.sub(ARGV[1], 1, -5) -- '{prefix}:' (ARGV[1] is '{prefix}:job:')
local function forget_outcomes(id)
  local key = base .. 'oc:' .. id
  local fields = redis.call('HGETALL', key)
  for f = 1, #fields, 2 do
    local at, state = string.match(fields[f], '^(.*)|(.-)$')
    local member = id .. '\n' .. state .. '\n' .. at
    if redis.call('ZREM', base .. 'outcomes:' .. state, member) == 1 then
      redis.call('ZREM', base .. 'outcomes:final', member)
      local task = cjson.decode(fields[f + 1])['task']
      redis.call('HINCRBY', base .. 'outcome_counts', state .. '\n' .. task, -1)
    end
  end
  redis.call('DEL', key)
end
local unique_key = base .. 'unique'  -- '<task>\n<key>' -> holder id (add_unique.lua)
local left = tonumber(ARGV[3])
local deleted = 0
for g = 0, (#KEYS - 3) / 2 - 1 do
  if left <= 0 then
    break
  end
  local finished_key, state_key, state = KEYS[4 + 2 * g], KEYS[5 + 2 * g], ARGV[4 + g]
  local ids = redis.call('ZRANGE', finished_key, '-inf', '(' .. ARGV[2], 'BYSCORE', 'LIMIT', 0,
    left)
  local gone = {}
  for _, id in ipairs(ids) do
    local key = ARGV[1] .. id
    -- A finished job never leaves its state, so the index names it rightly; were a hash to say
    -- otherwise (written by hand), it is only dropped from this index, never deleted.
    local job = redis.call('HMGET', key, 'state', 'task', 'unique_key')
    if job[1] == state then
      if job[3] then  -- free the key's field if it still names this job (no stale fields pile up)
        local field = job[2] .. '\n' .. job[3]
        if redis.call('HGET', unique_key, field) == id then
          redis.call('HDEL', unique_key, field)
        end
      end
      redis.call('DEL', key)
      forget_outcomes(id)
      gone[#gone + 1] = id
    end
  end
  call_in_slices('ZREM', finished_key, ids)
  if #gone > 0 then
    call_in_slices('ZREM', state_key, gone)
    call_in_slices('ZREM', KEYS[1], gone)
    call_in_slices('ZREM', KEYS[2], gone)
    call_in_slices('ZREM', KEYS[3], gone)
  end
  deleted = deleted + #gone
  left = left - #ids
end
return deleted
