-- SPDX-License-Identifier: MIT
-- RELEASE_GROUP_SLOT (doc/protocol.md §6.32): give back a group's slot taken by ADMIT and
-- bring the group's oldest set-aside job back to the fetch end of its queue, so that it
-- runs next (fair share, §7.35).
--
-- KEYS: [1] cogworker:group_slots:<class>:<group>  [2] cogworker:group_rate:<class>:<group>
--       ("" = no group_rate_limit)  [3] cogworker:group_jobs:<class>:<group>
--       [4] cogworker:groups:<class>
-- ARGV: [1] holder (the member ADMIT added)  [2] group  [3] group_concurrency (0 = none)
--       [4] group rate N (0 = none)  [5] rate window in seconds  [6] reservation ttl
--       (process_ttl)  [7] cogworker:queue:  [8] default queue  [9] caller's epoch (TIME
--       fallback)  [10] cogworker:paused_queues (nothing comes back to a paused queue)
-- Returns {released, moved}: released 1 when the lease was still there, 0 when it had
--   expired (or never existed); moved, the set-aside jobs brought back (0 or 1).
--
-- Order: ZREM slots holder -> clock = TIME (else ARGV[9]) -> group_return(..., cap 1)
--   (trim, room, reserve, RPUSH to the queue, ZREM, the index, the slots key's TTL); no
--   line: the trim and group_slots_keep (the key's TTL past its latest member).
-- Why: the freed slot goes to the job that waited longest for it, in the same step that
--   frees it, so a job pushed meanwhile can't take it and nothing in a process's memory
--   has to survive for the line to move. One job per release: a release frees one slot.
if redis.replicate_commands then pcall(redis.replicate_commands) end -- we read TIME

--@include group_slots_keep
--@include group_return

local removed = redis.call('ZREM', KEYS[1], ARGV[1])
local ok, t = pcall(redis.call, 'TIME')
local now = tonumber(ARGV[9])
if ok and type(t) == 'table' then now = tonumber(t[1]) + tonumber(t[2]) / 1000000 end
local moved = 0
if redis.call('EXISTS', KEYS[3]) == 1 then -- jobs set aside
	moved = group_return(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2], tonumber(ARGV[3]),
	                     tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), now,
	                     ARGV[7], ARGV[8], 1, ARGV[10])
else
	redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', now))
	group_slots_keep(KEYS[1], tonumber(ARGV[6]))
end
return {removed, moved}
