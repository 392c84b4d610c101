-- One chunk of RateLimitStore.requeue_waiting (redis/rate_limits.py): the jobs of a queue or
-- task waiting for a slot of its limit (due at the slot they keep as slot_at, still to come)
-- are made due now again (from a second ago, one microsecond apart in the order of their
-- slots, as sql/rate_limit_statements.py's requeue does), without the slot and its note, so
-- they reserve afresh under the limit now in force, or go when none is.
-- Walks at most ARGV[6] members of KEYS[1] (the due set, or the held set: held jobs keep their
-- state) in (score, member) order, from the first due after now on the first chunk (which also
-- forgets the limit's reserved slots: tat back to '-'), else strictly after (ARGV[4], ARGV[5]).
-- KEYS: 1 source set, 2 all-jobs index, 3 limits
-- ARGV: 1 job key prefix, 2 'queue' or 'task', 3 name, 4 after score ('' from the start),
--       5 after member, 6 chunk, 7 jobs placed by earlier chunks, 8 the limit's field
-- Returns {examined, moved, last score, last member} (examined < chunk: the set is done).
local at = now()
local start
if ARGV[4] == '' then
  start = redis.call('ZCOUNT', KEYS[1], '-inf', fmt(at))
  local old = redis.call('HGET', KEYS[3], ARGV[8])
  if old then
    local head, by = string.match(old, '^(%S+ %S+ %S+ %S+) %S+ (.*)$')
    if head then
      redis.call('HSET', KEYS[3], ARGV[8], head .. ' - ' .. by)
    end
  end
else
  start = rank_after(KEYS[1], ARGV[4], ARGV[5])
end
local batch = redis.call('ZRANGE', KEYS[1], start, start + tonumber(ARGV[6]) - 1, 'WITHSCORES')
if #batch == 0 then
  return {0, 0, '', ''}
end
local field = ARGV[2] == 'queue' and 3 or 2
local placed = tonumber(ARGV[7])
local stamp = fmt(at)
local moved, members = {}, {}
for i = 1, #batch, 2 do
  local id, score = batch[i], batch[i + 1]
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'slot_at', 'task', 'queue')
  if job[1] and job[field] == ARGV[3] and tonumber(job[1]) == tonumber(score) then
    local due = fmt(at - 1 + placed * 1e-6)
    placed = placed + 1
    redis.call('HSET', key, 'due_at', due, 'updated_at', stamp)
    redis.call('HDEL', key, 'slot_at', 'last_error')
    moved[#moved + 1] = id
    add_member(members, due, id)
  end
end
call_in_slices('ZADD', KEYS[1], members)
call_in_slices('ZADD', KEYS[2], members)
return {#batch / 2, #moved, batch[#batch], batch[#batch - 1]}
