-- How many ids of a finished index (scored by finish time) fall in each bucket from `since`:
-- bucket k is [since + k*width, since + (k+1)*width), k = 0 .. count-1. One snapshot.
-- KEYS: 1 finished index of one state
-- ARGV: 1 since, 2 width, 3 count
-- Returns the counts, oldest bucket first.
local since, width, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local counts = {}
for k = 0, count - 1 do
  counts[k + 1] = redis.call('ZCOUNT', KEYS[1], fmt(since + k * width),
    '(' .. fmt(since + (k + 1) * width))
end
return counts
