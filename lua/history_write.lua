-- SPDX-License-Identifier: MIT
-- HISTORY_WRITE (doc/protocol.md §6.35): one run's history entry, its jid index, the
-- trims and the day's counter (doc/protocol.md §7.22).
--
-- KEYS: [1] cogworker:history:all  [2] cogworker:history:success or …:failed
--       [3] cogworker:history:daily:<UTC day of the run's end>
--       [4] cogworker:history:jid:<jid> (the job's index; absent for an entry without jid)
-- ARGV: [1] the run's finished_at as written in the entry (the score)  [2] the entry
--       [3] the age cutoff, exclusive: "(<finished_at - retention>"  [4] history_max_entries
--       [5] the day's field: success or failed  [6] the day's TTL in seconds
--       [7] the index's TTL in seconds (the retention, rounded up)
--       [8] the run's outcome word: success, retrying, dead, killed or discarded
--       [9] the prefix of the index keys, cogworker:history:jid:
-- Returns 1, or the first error met (each step is tried on its own).
--
-- Order: ZADD the entry to [1] and [2] -> ZADD "<finished_at> <outcome>" (score finished_at)
-- to [4] + EXPIRE -> trim [1] by age then count, as always (what goes is read first, up to
-- BUDGET entries, and removed only when there is some), each trimmed entry read has its
-- pointer taken out of its jid's index -> trim [2] the same way -> HINCRBY [3] + EXPIRE.
-- Why: the index (what `cogworkerctl jobs show` and a job's page read) never outlives the
-- entries it points to: an entry trimmed from [1] takes its pointer with it in the same
-- call (beyond BUDGET at once, the TTL does), and an index emptied so is gone (Redis
-- deletes an empty set). The TTL bounds what
-- another writer's trims leave behind (a Ruby process trims without the index). One call
-- per run, the entry sent once instead of twice: a smaller write than the pipeline it
-- replaces. Every step through pcall: a damaged key fails its own step, never the others
-- (the pipeline before did the same), and the first error is returned to be logged.
local all, one, day, idx = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local f, entry, cutoff = ARGV[1], ARGV[2], ARGV[3]
local rank = -(tonumber(ARGV[4]) + 1)
local prefix = ARGV[9]
-- Trimmed entries whose pointers one call takes out, per trim (age, count): what a
-- history_max_entries or retention lowered by a reload trims at once is bounded work
-- (50 000 pointers took 0.4 s of Redis, blocking it); those beyond go by the TTL.
local BUDGET = 1000
local first_err

local function try(...)
  local res = redis.pcall(...)
  if type(res) == 'table' and res.err then
    first_err = first_err or res.err
    return nil
  end
  return res
end

-- The jid of a trimmed entry: this daemon writes it first, a string with no '"' or
-- backslash in it read as it stands; another writer's, or an escaped one, is decoded.
local HEAD = '^{"jid":"([^"' .. string.char(92) .. ']*)"'
local function jid_of(member)
  local jid = string.match(member, HEAD)
  if jid then
    return jid
  end
  local ok, e = pcall(cjson.decode, member)
  if ok and type(e) == 'table' and type(e.jid) == 'string' then
    return e.jid
  end
  return nil
end

-- The pointers of trimmed entries (a flat member, score, … reply) leave their indexes.
local function unindex(trimmed)
  if not trimmed then
    return
  end
  for i = 1, #trimmed, 2 do
    local jid = jid_of(trimmed[i])
    if jid and jid ~= '' then
      try('ZREMRANGEBYSCORE', prefix .. jid, trimmed[i + 1], trimmed[i + 1])
    end
  end
end

try('ZADD', all, f, entry)
try('ZADD', one, f, entry)
if idx then
  try('ZADD', idx, f, f .. ' ' .. ARGV[8])
  try('EXPIRE', idx, ARGV[7])
end
-- What goes is read first (its pointers go with it), at most BUDGET entries a trim: the
-- trim itself is whole, and the pointers of the rest go by their TTL.
local aged = try('ZRANGEBYSCORE', all, '-inf', cutoff, 'WITHSCORES', 'LIMIT', 0, BUDGET)
if aged and #aged > 0 then
  unindex(aged)
  try('ZREMRANGEBYSCORE', all, '-inf', cutoff)
end
local over = (try('ZCARD', all) or 0) - tonumber(ARGV[4])
if over > 0 then
  unindex(try('ZRANGE', all, 0, math.min(over, BUDGET) - 1, 'WITHSCORES'))
  try('ZREMRANGEBYRANK', all, 0, rank)
end
try('ZREMRANGEBYSCORE', one, '-inf', cutoff)
try('ZREMRANGEBYRANK', one, 0, rank)
try('HINCRBY', day, ARGV[5], 1)
try('EXPIRE', day, ARGV[6])
if first_err then
  return redis.error_reply(first_err)
end
return 1
