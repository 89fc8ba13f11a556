-- SPDX-License-Identifier: MIT
-- group_return(...): shared fragment (doc/protocol.md §6.34) of ADMIT, RELEASE_GROUP_SLOT
-- and GROUP_SWEEP (each includes group_slots_keep before it): bring a group's oldest set-aside jobs back to the fetch end of their queues,
-- as many as the group has room for, and say when the group is next to be looked at.
--
-- group_return(slots, starts, jobs, index, group, n, rate_n, window, ttl, now,
--              queue_prefix, default_queue, cap, paused) -> jobs moved
--   slots   cogworker:group_slots:<class>:<group>: leases (member = holder) and
--           reservations (member = "r <jid>") scored by expiry; expired ones are trimmed
--   starts  cogworker:group_rate:<class>:<group>: starts in the sliding window ("" = none)
--   jobs    cogworker:group_jobs:<class>:<group>: set-aside raw jobs (zset), scored by
--           when each was enqueued: the lowest comes back first
--   index   cogworker:groups:<class>: group -> when to look at it again
--   n, rate_n: the group's concurrency and rate (0 = none); cap: at most that many moved
--   paused  cogworker:paused_queues ("" or nil: not looked at)
--
-- Order: trim slots and starts -> room = min(n - slots, rate_n - starts, cap, ZCARD jobs)
--   -> per job: ZRANGE jobs 0 0 (the oldest), its queue (decoded, default_queue if none),
--   SISMEMBER paused queue (paused: stop, the next look in a second), ZADD slots now + ttl "r <jid>" and ZADD starts now "<now> r <jid>" (the reservation,
--   counted before the move) -> RPUSH queue raw (the fetch end: it runs next) -> ZREM jobs
--   raw -> the index: ZREM when no job is left, else ZADD the next look: now when the cap
--   stopped us, when the window opens when the rate did, else the soonest lease expiry
--   (a dead holder's slot frees itself then), at the latest now + ttl -> group_slots_keep
--   (the slots key's TTL: past its latest member's expiry).
-- Why: the reservation holds the slot (and the start) for the job moved, so a job of the
--   group pushed meanwhile can neither take its slot nor run ahead of it; ADMIT turns the
--   reservation into a lease. Check, write, then remove: an error never loses the job.
--   Nothing comes back to a paused queue: there it could not be fetched, its reservation
--   would expire, and the next look would bring the group's next job back in front of it
--   (RPUSH: the fetch end), one more per process_ttl until the line had moved to the
--   queue, out of its order; left in the line it keeps its place, and the group is looked
--   at again each second until its queue is resumed.
local function group_return(slots, starts, jobs, index, group, n, rate_n, window, ttl, now,
                            queue_prefix, default_queue, cap, paused)
	local function epoch(t) return string.format('%.6f', t) end
	redis.call('ZREMRANGEBYSCORE', slots, '-inf', epoch(now))
	local room = math.min(cap, redis.call('ZCARD', jobs))
	local next_look = now + ttl
	if n > 0 then
		local held = redis.call('ZCARD', slots)
		room = math.min(room, n - held)
		if held > 0 then
			local first = redis.call('ZRANGE', slots, 0, 0, 'WITHSCORES')
			next_look = math.min(next_look, tonumber(first[2]) + 0.001)
		end
	end
	local rate_full = false
	if rate_n > 0 and starts ~= '' then
		redis.call('ZREMRANGEBYSCORE', starts, '-inf', epoch(now - window))
		local count = redis.call('ZCARD', starts)
		room = math.min(room, rate_n - count)
		-- With the room's starts counted (at now, the newest), is the window full? Then it
		-- opens when the oldest of the last rate_n starts leaves it.
		local total = count + math.max(room, 0)
		if total >= rate_n then
			local i, t = total - rate_n, now
			if i < count then
				t = tonumber(redis.call('ZRANGE', starts, i, i, 'WITHSCORES')[2])
			end
			next_look, rate_full = t + window + 0.001, true
		end
	end
	local moved, held_back = 0, false
	while moved < room do
		local raw = redis.call('ZRANGE', jobs, 0, 0)[1]
		if not raw then break end
		local queue, jid = default_queue, ''
		local ok, job = pcall(cjson.decode, raw)
		if ok and type(job) == 'table' then
			if type(job.queue) == 'string' and job.queue ~= '' then queue = job.queue end
			if type(job.jid) == 'string' then jid = job.jid end
		end
		if paused and paused ~= '' and redis.call('SISMEMBER', paused, queue) == 1 then
			held_back = true
			break
		end
		if jid ~= '' then
			redis.call('ZADD', slots, epoch(now + ttl), 'r ' .. jid)
			if rate_n > 0 and starts ~= '' then
				redis.call('ZADD', starts, epoch(now), epoch(now) .. ' r ' .. jid)
				redis.call('PEXPIRE', starts, math.ceil(window * 1000) + 1000)
			end
		end
		redis.call('RPUSH', queue_prefix .. queue, raw)
		redis.call('ZREM', jobs, raw)
		moved = moved + 1
	end
	group_slots_keep(slots, ttl)
	if redis.call('ZCARD', jobs) == 0 then
		redis.call('ZREM', index, group)
	elseif held_back then
		redis.call('ZADD', index, epoch(math.min(next_look, now + 1)), group)
	elseif moved >= cap and not rate_full then
		redis.call('ZADD', index, epoch(now), group)
	else
		redis.call('ZADD', index, epoch(next_look), group)
	end
	return moved
end
