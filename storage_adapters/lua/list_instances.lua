-- Every instance record, ordered by id: rows {id, host, pid, version, started_at, heartbeat_at,
-- details} (the order of _INSTANCE_FIELDS in redis_instances.py), in one snapshot.
-- KEYS: 1 instances (every id by heartbeat time)
-- ARGV: instance key prefix ({prefix}:inst:)
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(ids)
local rows = {}
for _, id in ipairs(ids) do
  local row = redis.call('HMGET', ARGV[1] .. id, 'host', 'pid', 'version', 'started_at',
    'heartbeat_at', 'details')
  if row[5] then
    table.insert(row, 1, id)
    rows[#rows + 1] = row
  end
end
return rows
