-- The current, unexpired holder of a lock.
-- KEYS: 1 lock
-- Returns {owner, token, expires_at} or {}.
local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'expires_at')
if h[3] and tonumber(h[3]) > now() then
  return h
end
return {}
