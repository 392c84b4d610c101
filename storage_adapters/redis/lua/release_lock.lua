-- Free the lock if this lease still owns the key; the fencing counter is kept.
-- KEYS: 1 lock
-- ARGV: 1 owner, 2 token
-- Returns 1 if the lease was current when released, else 0 (an expired lease of ours is
-- still deleted: nobody else holds it).
local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'expires_at')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
if tonumber(h[3]) > now() then
  return 1
end
return 0
