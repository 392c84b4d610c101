-- One step of a keyset page (redis_browse.py): walk an index by due time, ties by id, from
-- strictly after (after_due, after_id) and from min_due on, up to max_due; keep the jobs whose
-- task, id prefix, task prefix and error text match, until `limit` are kept or `budget` members
-- were examined (a bound on how long this script holds the server: the caller goes on from the
-- last member examined). The text filters compare bytes, case included, never as patterns.
-- KEYS: 1 index (all jobs, or one state), scored by due_at
-- ARGV: 1 job key prefix, 2 min_due ('' none, inclusive), 3 max_due ('' none, inclusive),
--       4 after_due ('' none), 5 after_id, 6 task ('' any), 7 limit, 8 budget,
--       9 id prefix ('' any), 10 task prefix ('' any), 11 text the last error contains ('' any)
-- Returns {more, last_due, last_id, rows...}: more is 1 when the budget ran out first (then the
-- last member examined is the next step's after), each row {id, task, payload, due_at, state,
-- attempts, created_at, updated_at, last_error, queue, unique_key}.

local index, prefix = KEYS[1], ARGV[1]
local max_due = ARGV[3] ~= '' and tonumber(ARGV[3]) or nil
local task, limit, budget = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local id_prefix, task_prefix, error_text = ARGV[9] or '', ARGV[10] or '', ARGV[11] or ''

local function starts(text, prefix)
  return prefix == '' or (text ~= false and string.sub(text, 1, #prefix) == prefix)
end

-- whether the job under `key` passes the task, task prefix and error filters (the id prefix is
-- checked on the member, before any read)
local function wanted(key)
  if task == '' and task_prefix == '' and error_text == '' then
    return true
  end
  local named = redis.call('HMGET', key, 'task', 'last_error')
  if task ~= '' and named[1] ~= task then
    return false
  end
  if not starts(named[1], task_prefix) then
    return false
  end
  return error_text == '' or (named[2] ~= false and string.find(named[2], error_text, 1, true) ~= nil)
end

local start = 0
if ARGV[2] ~= '' then
  start = redis.call('ZCOUNT', index, '-inf', '(' .. ARGV[2])
end
if ARGV[4] ~= '' then
  -- the first rank after the tie group's members up to after_id (the after job may be gone)
  start = math.max(start, rank_after(index, ARGV[4], ARGV[5]))
end

local fields = {'task', 'payload', 'due_at', 'state', 'attempts', 'created_at', 'updated_at',
  'last_error', 'queue', 'unique_key'}
local rows, examined, last_due, last_id = {}, 0, '', ''
local more = 1
while true do
  local chunk = math.min(budget - examined, 200)
  if chunk <= 0 then
    break
  end
  local batch = redis.call('ZRANGE', index, start, start + chunk - 1, 'WITHSCORES')
  if #batch == 0 then
    more = 0
    break
  end
  for i = 1, #batch, 2 do
    local id, due = batch[i], batch[i + 1]
    if max_due and tonumber(due) > max_due then
      more = 0
      break
    end
    examined, last_due, last_id = examined + 1, due, id
    local key = prefix .. id
    if starts(id, id_prefix) and wanted(key) then
      local row = redis.call('HMGET', key, unpack(fields))
      if row[1] then
        table.insert(row, 1, id)
        rows[#rows + 1] = row
        if #rows >= limit then
          more = 0
          break
        end
      end
    end
  end
  if more == 0 then
    break
  end
  start = start + #batch / 2
end
return {more, last_due, last_id, rows}
