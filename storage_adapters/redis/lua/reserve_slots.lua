-- Reserve the next ARGV[2] release slots of one rate limit, atomically on the server clock: the
-- generic cell rate algorithm of RateLimitStore.reserve_release_slots. This MIRRORS
-- storage_adapters/gcra.py reserve_slots EXACTLY (same operations in the same order on the same
-- doubles, so both compute the very same slots and tat); change one, change the other:
--   interval = period / count; tolerance = (burst - 1) * interval; at = tat or now
--   per slot: slot = max(now, at - tolerance); at = max(at, slot) + interval
-- The limit's value ('<count> <period> <burst> <set_at> <tat> <set_by>', see
-- put_rate_limit.lua) is rewritten with the new tat, everything else kept.
-- KEYS: 1 limits
-- ARGV: 1 field ('queue:<name>' or 'task:<name>'), 2 how many slots (>= 1)
-- Returns {now, slot, slot, ...} as '%.17g' strings, or nil when no such limit is in force.
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then
  return false
end
local count, period, burst, set_at, tat, set_by =
  string.match(value, '^(%S+) (%S+) (%S+) (%S+) (%S+) (.*)$')
if not count then  -- a hand-edited value: no limit this script can keep
  return false
end
local t = now()
local interval = tonumber(period) / tonumber(count)
local tolerance = (tonumber(burst) - 1) * interval
local at = tat == '-' and t or tonumber(tat)
local out = {fmt(t)}
for n = 1, tonumber(ARGV[2]) do
  local slot = math.max(t, at - tolerance)
  out[n + 1] = fmt(slot)
  at = math.max(at, slot) + interval
end
redis.call('HSET', KEYS[1], ARGV[1],
  table.concat({count, period, burst, set_at, fmt(at), set_by}, ' '))
return out
