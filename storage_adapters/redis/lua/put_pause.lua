-- Put a pause in force, or replace the note and paused_by of one in force, keeping when it was
-- first made. The pauses hash maps 'queue:<name>' or 'task:<name>' to '<paused_at> <record>'
-- (record: the JSON [paused_by, note] the caller encoded; paused_at is this server's clock).
-- KEYS: 1 pauses
-- ARGV: 1 field, 2 record
-- Returns 1 if the pause is new, 0 if it was in force already.
local old = redis.call('HGET', KEYS[1], ARGV[1])
local paused_at = old and string.match(old, '^[^ ]+') or fmt(now())
redis.call('HSET', KEYS[1], ARGV[1], paused_at .. ' ' .. ARGV[2])
return old and 0 or 1
