-- Claim up to ARGV[5] due jobs, earliest first, under one check of the lock lease.
-- KEYS: 1 lock, 2 schedule, 3 claim leases, 4 claimed-state index
-- ARGV: 1 job key prefix, 2 lock owner, 3 lock token, 4 lease seconds, 5 limit
-- Returns the claimed jobs flattened: id, task, payload, due_at, attempts, id, ...
local at = now()
if not lock_is_current(KEYS[1], ARGV[2], ARGV[3], at) then
  return {}
end
local keys = {KEYS[2], KEYS[3], KEYS[4]}
local lease_until = at + tonumber(ARGV[4])
local ids = redis.call('ZRANGE', KEYS[2], '-inf', fmt(at), 'BYSCORE', 'LIMIT', 0, ARGV[5])
local out = {}
for _, id in ipairs(ids) do
  local claimed = claim_one(keys, ARGV[1], id, ARGV[3], at, lease_until)
  if claimed then
    for _, value in ipairs(claimed) do
      out[#out + 1] = value
    end
  end
end
return out
