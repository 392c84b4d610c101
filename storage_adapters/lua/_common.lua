-- Helpers prepended to every script of the Redis adapter (Redis scripts cannot include files).
--
-- Floats cross the Lua boundary as '%.17g' strings: Lua's tostring keeps only 14 digits and a
-- Lua number returned to the client is truncated to an integer, either of which would move a
-- due time by microseconds and break equality with what the client stored.

local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function fmt(x)
  return string.format('%.17g', x)
end

-- The fence: a lease acts only while it is still the lock's current, unexpired holder.
local function lock_is_current(lock_key, owner, token, at)
  local h = redis.call('HMGET', lock_key, 'owner', 'token', 'expires_at')
  return h[1] == owner and h[2] == token and tonumber(h[3]) > at
end

-- SCHEDULED -> CLAIMED for one job already known to be due. Returns {id, task, payload, due_at,
-- attempts} or nil. keys = {schedule, claim leases, claimed-state index}.
local function claim_one(keys, job_prefix, id, token, at, lease_until)
  local key = job_prefix .. id
  local job = redis.call('HMGET', key, 'task', 'payload', 'due_at', 'state')
  if job[4] ~= 'scheduled' then
    -- Cannot happen while every write goes through these scripts; heal rather than spin on it.
    redis.call('ZREM', keys[1], id)
    return nil
  end
  local attempts = redis.call('HINCRBY', key, 'attempts', 1)
  redis.call('HSET', key, 'state', 'claimed', 'claim_token', token,
    'lease_until', fmt(lease_until), 'updated_at', fmt(at))
  redis.call('ZREM', keys[1], id)
  redis.call('ZADD', keys[2], fmt(lease_until), id)
  redis.call('ZADD', keys[3], job[3], id)
  return {id, job[1], job[2], job[3], attempts}
end

