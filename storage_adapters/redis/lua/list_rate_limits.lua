-- Every rate limit in force and the server clock, in one snapshot: the caller computes each
-- limit's free_at against this very "now" (the clock reserve_slots.lua reserves on).
-- KEYS: 1 limits
-- Returns {now, field, value, field, value, ...} (values as put_rate_limit.lua writes them).
local out = {fmt(now())}
for _, item in ipairs(redis.call('HGETALL', KEYS[1])) do
  out[#out + 1] = item
end
return out
