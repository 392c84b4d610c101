-- Put a rate limit in force, or replace the numbers and set_by of one in force, keeping when it
-- was first set (set_at) and the slots already reserved (tat), as RateLimitStore.set_rate_limit
-- asks. The limits hash maps 'queue:<name>' or 'task:<name>' to
-- '<count> <period> <burst> <set_at> <tat> <set_by>': set_by last, since it may hold spaces;
-- tat is '-' until the first reservation (then '%.17g' of the server clock, like set_at).
-- KEYS: 1 limits
-- ARGV: 1 field, 2 count, 3 period (repr of a float), 4 burst, 5 set_by
-- Returns 1 if the limit is new, 0 if one was in force already.
local old = redis.call('HGET', KEYS[1], ARGV[1])
local set_at, tat
if old then
  set_at, tat = string.match(old, '^%S+ %S+ %S+ (%S+) (%S+) ')
end
if not set_at then  -- new, or a hand-edited value that cannot be read: start afresh
  set_at, tat = fmt(now()), '-'
end
redis.call('HSET', KEYS[1], ARGV[1],
  table.concat({ARGV[2], ARGV[3], ARGV[4], set_at, tat, ARGV[5]}, ' '))
return old and 0 or 1
