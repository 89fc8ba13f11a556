-- SPDX-License-Identifier: MIT
-- GROUP_SWEEP (doc/protocol.md §6.33): the poller's look at a handler class's groups with
-- set-aside jobs that are due (a slot whose holder died has expired, the rate window has
-- opened), bringing back what each has room for, round-robin across groups (fair share,
-- §7.35).
--
-- KEYS: [1] cogworker:groups:<class>
-- ARGV: [1] cogworker:group_slots:<class>:  [2] cogworker:group_rate:<class>:
--       [3] cogworker:group_jobs:<class>:  (prefixes: + group)  [4] group_concurrency
--       (0 = none)  [5] group rate N (0 = none)  [6] rate window in seconds
--       [7] reservation ttl (process_ttl)  [8] cogworker:queue:  [9] default queue
--       [10] at most this many groups  [11] at most this many jobs per group
--       [12] caller's epoch (TIME fallback)  [13] cogworker:paused_queues (nothing comes
--       back to a paused queue)
-- Returns {groups looked at, jobs moved}.
--
-- Order: clock = TIME (else ARGV[12]) -> ZRANGEBYSCORE index -inf clock LIMIT 0 groups (the
--   due groups, the one due longest first) -> per group: group_return (trim, room, reserve,
--   RPUSH to the queue, ZREM, the group's next look in the index).
-- Why: a release brings back a job as it frees a slot, but a slot whose holder died frees
--   itself by expiring, and a rate window opens by time: nobody releases those, so the
--   poller looks. Each group's next look is written by the look (its soonest lease expiry,
--   or its window's opening), so a group whose slots are held by live jobs is looked at
--   about once per process_ttl, not every poll. Every group gets at most its room per
--   look, and a group still due goes to the back of the index's order (its new score):
--   round-robin, no group can hold the look. An absent class (its handler gone from the
--   conf) is looked at with no limits: its jobs all come back (ARGV[4], [5] = 0).
if redis.replicate_commands then pcall(redis.replicate_commands) end -- we read TIME

--@include group_slots_keep
--@include group_return

local index = KEYS[1]
local ok, t = pcall(redis.call, 'TIME')
local now = tonumber(ARGV[12])
if ok and type(t) == 'table' then now = tonumber(t[1]) + tonumber(t[2]) / 1000000 end
local n, rate_n, window, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
	tonumber(ARGV[7])
local due = redis.call('ZRANGEBYSCORE', index, '-inf', string.format('%.6f', now),
                       'LIMIT', 0, tonumber(ARGV[10]))
local moved = 0
for _, group in ipairs(due) do
	local starts = rate_n > 0 and (ARGV[2] .. group) or ''
	moved = moved + group_return(ARGV[1] .. group, starts, ARGV[3] .. group, index, group, n,
	                             rate_n, window, ttl, now, ARGV[8], ARGV[9],
	                             tonumber(ARGV[11]), ARGV[13])
end
return {#due, moved}
