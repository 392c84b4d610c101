-- Every instance record, ordered by id: rows {id, host, pid, version, started_at, heartbeat_at,
-- details} (the order of _INSTANCE_FIELDS in redis_instances.py), in one snapshot.
-- KEYS: 1 instances (every id by heartbeat time)
-- ARGV: instance key prefix ({prefix}:inst:)
-- register_instance writes every field at once and heartbeat_instance only touches an existing
-- hash, so "host is set" (what hash_rows checks) means "the record exists".
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(ids)
return hash_rows(ARGV[1], ids, {'host', 'pid', 'version', 'started_at', 'heartbeat_at', 'details'})
