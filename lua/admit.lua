-- SPDX-License-Identifier: MIT
-- ADMIT (doc/protocol.md §6.21): let a fetched job start under its handler's fleet-wide
-- limits (fleet_concurrency, rate_limit), or turn it away to the schedule set until it may;
-- and under its group's (group_concurrency, group_rate_limit: fair share, §7.35), or set it
-- aside in its group's line until the group has room.
--
-- KEYS: [1] cogworker:limit:<class> (fleet slots; "" = no fleet_concurrency)
--       [2] cogworker:rate:<class> (recent starts; "" = no rate_limit)
--       [3] cogworker:limit_waiters:<class>  [4] cogworker:limits
--       [5] cogworker:inprogress:<self> ("" in basic mode: the job is only in memory)
--       [6] cogworker:schedule
--       [7] cogworker:group_slots:<class>:<group>  [8] cogworker:group_rate:<class>:<group>
--       ("" = no group_rate_limit)  [9] cogworker:group_jobs:<class>:<group>
--       [10] cogworker:groups:<class>  (7-10 absent or [9] "": no group limits)
-- ARGV: [1] raw job  [2] class (the handler's)  [3] this process's declaration of the
--       class's limits (JSON text)  [4] fleet N  [5] holder ("<identity> <fetcher> <jid>")
--       [6] lease ttl in seconds (process_ttl)  [7] rate N  [8] rate window in seconds
--       [9] jid ("" = none)  [10] the delay before a job without a fleet slot is tried
--       again, when no other job waits (seconds)  [11] caller's epoch (TIME fallback)
--       [12] group  [13] group_concurrency (0 = none)  [14] group rate N (0 = none)
--       [15] group rate window in seconds  [16] cogworker:queue:  [17] default queue
--       [18] the job's place in its group's line (when it was enqueued, epoch seconds)
--       [19] cogworker:paused_queues (nothing comes back to a paused queue)
-- Returns {status, time, why, previous declaration}: {1, lease expiry or "", "", prev}
--   admitted (the lease taken, the start counted); {0, time of the next try, "fleet" or
--   "rate", prev} turned away (the job is in the schedule set at that time and no longer
--   on the in-progress list); {0, "", "group" or "group_rate", prev} set aside (the job is
--   in its group's line and no longer on the in-progress list; a payload already in the
--   line, byte for byte, goes to the schedule set instead, due in ARGV[10]); {-1, "", "", prev} the job is not on the in-progress list
--   (nothing touched but the declaration). Times are epoch strings with six decimals;
--   prev is the declaration found when it differed from ARGV[3], else "".
--
-- Order:
--   1. clock = TIME (else ARGV[11]); HGET limits class, different -> HSET (pcall both).
--   G. group: ZREMRANGEBYSCORE gslots -inf clock; returning = ZSCORE gslots "r <jid>" (a
--      job group_return brought back, its slot and start reserved): it passes. Else: ZCARD
--      gjobs > 0 (jobs of the group wait) or ZCARD gslots >= group N -> "group";
--      ZREMRANGEBYSCORE gstarts -inf clock - W, ZCARD >= group rate N -> "group_rate".
--   2. fleet: ZREMRANGEBYSCORE slots -inf clock (expired leases); ZCARD >= N -> turned
--      away until clock + delay * (1 + waiting / N).
--   3. rate: ZREMRANGEBYSCORE starts -inf clock - W; ZCARD >= N -> turned away until the
--      start that has to leave the window leaves it (its score + W), plus W per N jobs
--      waiting. (waiting: pcall ZCOUNT waiters of a later next try, the jobs ahead.)
--   4. admitted: ZADD slots clock + ttl holder; ZADD starts clock "<clock> <holder>",
--      PEXPIRE starts W; pcall ZREM waiters jid; group: ZREM gslots "r <jid>", ZADD gslots
--      clock + ttl holder (with a group N), ZADD gstarts (unless returning: counted then),
--      group_slots_keep (the slots key's TTL, lua/lib/group_slots_keep.lua).
--   G'. set aside: LPOS inprogress raw -> none: -1; ZADD NX gjobs place raw (a twin already
--      there: ZADD schedule clock + delay raw); LREM inprogress 1 raw;
--      group_return (lua/lib/group_return.lua): the oldest the group has room for come
--      back at once (a slot expired, a window opened), and the group's next look goes
--      into the index.
--   5. turned away: LPOS inprogress raw -> none: -1; ZADD schedule at raw; LREM inprogress
--      1 raw; pcall ZADD waiters at jid, pcall trim waiters due over 60 s ago.
--
-- Why: the count, the admission and the lease are one atomic step, so two processes can
-- never both take the last slot; the slot is checked before the rate so a job without a
-- slot does not use up a start of the window. A job turned away moves from the in-progress
-- list to the schedule set in the same step (check, write, then remove), so it is never
-- lost, never counted as a failure and keeps its retry_count: the scheduled poller puts it
-- back on its queue when the time comes, with no busy loop. The raw payload is moved as
-- it is (no re-encoding, lesson 7). Each job turned away is given a later turn the more
-- jobs wait ahead of it (one more delay, or window, per N of them), so however many wait,
-- about N come back per delay or window: the tries cost the same for ten waiting jobs or
-- ten thousand, and they don't all come back at once. Leases are scored by their expiry on Redis's clock and
-- refreshed by the holder's heartbeat, so the slots of a process that died free themselves
-- within process_ttl. The group is looked at first: a job set aside for its group uses up
-- no fleet slot and no start. A job of a group with jobs set aside waits behind them, even
-- with a slot free, so a group's jobs start in their order (a set-aside job comes back
-- holding a reservation, which only it can use). The declaration lets a process see that another one declares other
-- limits for the same class (a logged warning) and lets cogworkerctl list the limits.
if redis.replicate_commands then pcall(redis.replicate_commands) end -- we read TIME

--@include group_slots_keep
--@include group_return

local slots, starts, waiters, limits, inprogress, schedule =
	KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local raw, class, decl = ARGV[1], ARGV[2], ARGV[3]
local fleet_n, holder, ttl = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local rate_n, window, jid = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
local delay, caller_now = tonumber(ARGV[10]), tonumber(ARGV[11])
local gslots, gstarts, gjobs, gindex = KEYS[7] or '', KEYS[8] or '', KEYS[9] or '', KEYS[10]
local group, group_n = ARGV[12], tonumber(ARGV[13] or '0')
local group_rate_n, group_window = tonumber(ARGV[14] or '0'), tonumber(ARGV[15] or '0')
local queue_prefix, default_queue, place = ARGV[16], ARGV[17], ARGV[18]

local function clock()
	local ok, t = pcall(redis.call, 'TIME')
	if ok and type(t) == 'table' then return tonumber(t[1]) + tonumber(t[2]) / 1000000 end
	return caller_now
end
local function epoch(t) return string.format('%.6f', t) end

local now = clock()

-- 1. The declaration.
local previous = ''
local ok, old = pcall(redis.call, 'HGET', limits, class)
if ok and old ~= decl then
	if old then previous = old end
	pcall(redis.call, 'HSET', limits, class, decl)
end

-- The jobs turned away that wait for a later turn than now: the line ahead of this one.
local function waiting()
	local ok, count = pcall(redis.call, 'ZCOUNT', waiters, '(' .. epoch(now), '+inf')
	return ok and count or 0
end

-- G. The group's room.
local at, why
local returning = false
if gjobs ~= '' then
	redis.call('ZREMRANGEBYSCORE', gslots, '-inf', epoch(now))
	returning = jid ~= '' and redis.call('ZSCORE', gslots, 'r ' .. jid) ~= false
	if not returning then
		if redis.call('ZCARD', gjobs) > 0 or
				(group_n > 0 and redis.call('ZCARD', gslots) >= group_n) then
			why = 'group'
		elseif group_rate_n > 0 then
			redis.call('ZREMRANGEBYSCORE', gstarts, '-inf', epoch(now - group_window))
			if redis.call('ZCARD', gstarts) >= group_rate_n then why = 'group_rate' end
		end
	end
end

-- G'. Set aside in the group's line.
if why then
	if inprogress ~= '' and not redis.call('LPOS', inprogress, raw) then
		return {-1, '', '', previous}
	end
	if redis.call('ZADD', gjobs, 'NX', place, raw) == 0 then
		-- Its twin is in the line (the same payload pushed twice): a set can't hold both,
		-- so this one waits in the schedule set, as a fleet limit's would, and loses nothing.
		at = now + delay
		redis.call('ZADD', schedule, epoch(at), raw)
		if inprogress ~= '' then redis.call('LREM', inprogress, 1, raw) end
		return {0, epoch(at), why, previous}
	end
	if inprogress ~= '' then redis.call('LREM', inprogress, 1, raw) end
	-- Room already (a dead holder's slot expired just now, a window opened)? The oldest
	-- come back at once; else the group's next look goes into the index.
	group_return(gslots, gstarts, gjobs, gindex, group, group_n, group_rate_n, group_window,
	             ttl, now, queue_prefix, default_queue, redis.call('ZCARD', gjobs), ARGV[19])
	return {0, '', why, previous}
end

-- 2, 3. Room?
if slots ~= '' then
	redis.call('ZREMRANGEBYSCORE', slots, '-inf', epoch(now))
	if redis.call('ZCARD', slots) >= fleet_n then
		at, why = now + delay * (1 + math.floor(waiting() / fleet_n)), 'fleet'
	end
end
if not why and starts ~= '' then
	redis.call('ZREMRANGEBYSCORE', starts, '-inf', epoch(now - window))
	local count = redis.call('ZCARD', starts)
	if count >= rate_n then
		local first = redis.call('ZRANGE', starts, count - rate_n, count - rate_n, 'WITHSCORES')
		at = tonumber(first[2]) + window + 0.001 + window * math.floor(waiting() / rate_n)
		why = 'rate'
	end
end

-- 4. Admitted.
if not why then
	local expiry = ''
	if slots ~= '' then
		expiry = epoch(now + ttl)
		redis.call('ZADD', slots, expiry, holder)
	end
	if starts ~= '' then
		redis.call('ZADD', starts, epoch(now), epoch(now) .. ' ' .. holder)
		redis.call('PEXPIRE', starts, math.ceil(window * 1000) + 1000)
	end
	if jid ~= '' then pcall(redis.call, 'ZREM', waiters, jid) end
	if gjobs ~= '' then
		if returning then redis.call('ZREM', gslots, 'r ' .. jid) end
		if group_n > 0 then
			expiry = epoch(now + ttl)
			redis.call('ZADD', gslots, expiry, holder)
		end
		if group_rate_n > 0 and not returning then
			redis.call('ZADD', gstarts, epoch(now), epoch(now) .. ' ' .. holder)
			redis.call('PEXPIRE', gstarts, math.ceil(group_window * 1000) + 1000)
		end
		group_slots_keep(gslots, ttl)
	end
	return {1, expiry, '', previous}
end

-- 5. Turned away: from the in-progress list to the schedule set.
if inprogress ~= '' and not redis.call('LPOS', inprogress, raw) then
	return {-1, '', '', previous}
end
redis.call('ZADD', schedule, epoch(at), raw)
if inprogress ~= '' then redis.call('LREM', inprogress, 1, raw) end
if jid ~= '' then
	pcall(redis.call, 'ZADD', waiters, epoch(at), jid)
	pcall(redis.call, 'ZREMRANGEBYSCORE', waiters, '-inf', epoch(now - 60))
end
return {0, epoch(at), why, previous}
