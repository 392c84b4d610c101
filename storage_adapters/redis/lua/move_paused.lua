-- One chunk of a pause's sweep (redis/pauses.py), in either direction:
--   hold:    SCHEDULED jobs of the due set that a pause holds -> HELD, into the held set;
--   release: HELD jobs of the held set that no pause holds any more -> SCHEDULED, into the
--            due set.
-- Walks at most ARGV[5] members of the source set (KEYS[1]) in (score, member) order, strictly
-- after (ARGV[3], ARGV[4]): a position that stays right while other scripts remove members
-- (claims, cancels, this sweep's own moves) between chunks, so the sweep misses none that were
-- there when it began. Members added behind it meanwhile were judged by the pauses then in
-- force by the script that added them. Each job is judged by the pauses in force now.
-- KEYS: 1 source set, 2 target set, 3 pauses
-- ARGV: 1 job key prefix, 2 'hold' or 'release', 3 after score ('' from the start),
--       4 after member, 5 chunk
-- Returns {examined, moved, last score, last member} (examined < chunk: the set is done).

local source, target = KEYS[1], KEYS[2]
local hold = ARGV[2] == 'hold'
local paused = pauses_in_force(KEYS[3])
if hold and not paused then
  return {0, 0, '', ''}  -- the pause was ended meanwhile: nothing to hold
end
local start = 0
if ARGV[3] ~= '' then
  start = rank_after(source, ARGV[3], ARGV[4])  -- the first member after (score, member)
end
local batch = redis.call('ZRANGE', source, start, start + tonumber(ARGV[5]) - 1, 'WITHSCORES')
if #batch == 0 then
  return {0, 0, '', ''}
end
local from_state, to_state = 'scheduled', 'held'
if not hold then
  from_state, to_state = 'held', 'scheduled'
end
local stamp = fmt(now())
local moved, members = {}, {}
for i = 1, #batch, 2 do
  local id = batch[i]
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'state', 'task', 'queue')
  if job[1] == from_state and is_held(paused, job[2], job[3]) == hold then
    redis.call('HSET', key, 'state', to_state, 'updated_at', stamp)
    moved[#moved + 1] = id
    add_member(members, batch[i + 1], id)
  end
end
call_in_slices('ZREM', source, moved)
call_in_slices('ZADD', target, members)
return {#batch / 2, #moved, batch[#batch], batch[#batch - 1]}
