-- Delete at most limit instances whose heartbeat is older than cutoff, oldest first.
-- KEYS: 1 instances (every id by heartbeat time)
-- ARGV: instance key prefix ({prefix}:inst:), cutoff, limit
-- Returns how many were deleted.
local ids = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. ARGV[2], 'BYSCORE', 'LIMIT', 0, ARGV[3])
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[1] .. id)
  redis.call('ZREM', KEYS[1], id)
end
return #ids
