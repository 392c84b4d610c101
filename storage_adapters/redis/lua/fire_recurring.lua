-- Fire a chunk of recurring jobs: for each, store its firing jobs and move it on, only while the
-- lock lease is current and the recurring job is still at the version its firing was planned
-- from (the compare-and-set that makes two racing firings of one tick succeed once). One script
-- for the chunk, so it is all written or none of it is.
-- With a broker database given (the broker's lists live on this server), a new firing job that
-- is due and carries an envelope ('<list key>\n<message>', as release_to_lists reads it) goes
-- straight onto its list and is stored Enqueued, as the one-script release would have done a
-- moment later: in the broker and Enqueued, or neither. The others are stored Scheduled, or
-- Held (in the held set, never pushed) when a pause holds them (add_job in _common.lua).
-- KEYS: 1 lock, 2 recurring due index, 3 all-jobs index, 4 schedule, 5 pauses, 6 held set,
--       7 enqueued-state index, 8 enqueued finished index
-- ARGV: 1 lock owner, 2 lock token, 3 recurring key prefix, 4 job key prefix, 5 the broker's
--       database number ('' for none: store every firing Scheduled), 6 this storage's database
--       number, then per recurring job: id, expected version, next_run_at ('' for none),
--       last_run_at ('' for none), history, job count n, then id, task, payload, due_at,
--       envelope, queue ('' for none) per firing job
-- Returns per recurring job false (stale: nothing written for it; a missing recurring job has no
-- version, so it is stale too) or a string with one flag per job: '0' existed, '1' stored
-- Scheduled or Held, '2' stored Enqueued and pushed onto its broker list.
local FIRST = 7
local at = now()
local current_lock = lock_is_current(KEYS[1], ARGV[1], ARGV[2], at)
local stamp = fmt(at)
local job_keys = {KEYS[3], KEYS[4], KEYS[6]}
local list_db, storage_db = ARGV[5], ARGV[6]
local paused = pauses_in_force(KEYS[5])

-- The list the firing job whose fields start at ARGV[j] goes straight to, or nil: only with a
-- broker database, when due, when no pause holds it and when its envelope names a list.
local function list_of(j)
  local envelope, due = ARGV[j + 4], ARGV[j + 3]
  if list_db == '' or tonumber(due) > at or is_held(paused, ARGV[j + 1], ARGV[j + 5]) then
    return nil
  end
  local cut = string.find(envelope, '\n', 1, true)
  return cut and string.sub(envelope, 1, cut - 1)
end

-- Which lists can take a push (a list, or no key yet), asked once per list before any write.
local pushable = {}
if current_lock and list_db ~= '' then
  local lists = {}
  local i = FIRST
  while i <= #ARGV do
    local after = i + 6 + 6 * tonumber(ARGV[i + 5])
    for j = i + 6, after - 1, 6 do
      local list = list_of(j)
      if list and pushable[list] == nil then
        pushable[list] = false
        lists[#lists + 1] = list
      end
    end
    i = after
  end
  if #lists > 0 then
    redis.call('SELECT', list_db)
    for _, list in ipairs(lists) do
      local kind = redis.call('TYPE', list)['ok']
      pushable[list] = kind == 'list' or kind == 'none'
    end
    redis.call('SELECT', storage_db)
  end
end

-- What the loop below adds to the sorted sets, sent once per set at the end (one command per
-- slice of 1000, not one per job): a script runs alone, so no reader sees the sets in between.
local messages, enqueued_index, finished_index, all_index = {}, {}, {}, {}
local due_added, due_removed = {}, {}
local function push_job(id, task, payload, due, envelope, queue, list)
  local key = ARGV[4] .. id
  if redis.call('EXISTS', key) == 1 then
    return '0'
  end
  redis.call('HSET', key, 'task', task, 'payload', payload, 'due_at', due, 'state', 'enqueued',
    'attempts', 1, 'claim_token', ARGV[2], 'created_at', stamp, 'updated_at', stamp)
  if queue ~= '' then
    redis.call('HSET', key, 'queue', queue)
  end
  add_member(all_index, due, id)
  add_member(enqueued_index, due, id)
  add_member(finished_index, stamp, id)
  if not messages[list] then
    messages[list] = {}
  end
  local queued = messages[list]
  queued[#queued + 1] = string.sub(envelope, #list + 2)
  return '2'
end

local results = {}
local i = FIRST
while i <= #ARGV do
  local id, version, next_run_at = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local first_job = i + 6
  local after = first_job + 6 * tonumber(ARGV[i + 5])
  local key = ARGV[3] .. id
  local current = redis.call('HMGET', key, 'version', 'enabled')
  if not current_lock or current[1] ~= version then
    results[#results + 1] = false
  else
    local stored = {}
    for j = first_job, after - 1, 6 do
      local list = list_of(j)
      if list and pushable[list] then
        stored[#stored + 1] = push_job(ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3],
          ARGV[j + 4], ARGV[j + 5], list)
      else
        stored[#stored + 1] = add_job(job_keys, paused, ARGV[4], ARGV[j], ARGV[j + 1],
          ARGV[j + 2], ARGV[j + 3], ARGV[j + 4], ARGV[j + 5], stamp)
      end
    end
    redis.call('HSET', key, 'next_run_at', next_run_at, 'last_run_at', ARGV[i + 3],
      'history', ARGV[i + 4], 'updated_at', stamp, 'version', tonumber(version) + 1)
    if current[2] == '1' and next_run_at ~= '' then -- as index_recurring_due, batched
      add_member(due_added, next_run_at, id)
    else
      due_removed[#due_removed + 1] = id
    end
    results[#results + 1] = table.concat(stored)
  end
  i = after
end

call_in_slices('ZADD', KEYS[2], due_added)
call_in_slices('ZREM', KEYS[2], due_removed)
if #enqueued_index > 0 then
  call_in_slices('ZADD', KEYS[3], all_index)
  redis.call('SELECT', list_db)
  for list, queued in pairs(messages) do
    call_in_slices('LPUSH', list, queued)
  end
  redis.call('SELECT', storage_db)
  call_in_slices('ZADD', KEYS[7], enqueued_index)
  call_in_slices('ZADD', KEYS[8], finished_index)
end
return results
