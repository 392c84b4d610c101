-- End a pause (its held jobs are given back by move_paused.lua afterwards, in chunks).
-- KEYS: 1 pauses
-- ARGV: 1 field ('queue:<name>' or 'task:<name>')
-- Returns 1 if it was in force, else 0.
return redis.call('HDEL', KEYS[1], ARGV[1])
