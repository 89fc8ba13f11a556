-- SPDX-License-Identifier: MIT
-- REQUEUE (doc/protocol.md §6.4): recover a dead owner's in-progress list, or hand back the
-- process's own list at shutdown.
--
-- KEYS: [1] cogworker:inprogress:<owner>  [2] cogworker:process:<owner> (presence)
--       [3] cogworker:last_beat  [4] cogworker:repeat_orphans  [5] cogworker:dead
--       [6] cogworker:queues  [7] cogworker:live_queues
--       [8] cogworker:at_most_once:<owner> (optional: the classes the owner declared
--       at most once)  [9] cogworker:at_most_once_orphans (optional: their parking list)
-- ARGV: [1] cogworker:queue:  [2] default  [3] periodic:running:  [4] queued_ttl
--       [5] owner identity  [6] orphan threshold in seconds ("" = unconditional: the
--       process's own list at shutdown)  [7] caller's epoch seconds (TIME fallback, and
--       the score of a raw burial)  [8] cogworker:orphanings:  [9] 604800
--       [10] max_orphanings  [11] cogworker:batch:settled:  [12] waited (the mark a
--       requeued job's settled record gets, SETTLED_WAITED in src/workflow.h)
--       [13..] marks: "d:<raw>" = finished, drop it (this is its
--       ack); "k:<raw>" = keep it on the list; "o:<class>" = a class the caller runs at
--       most once (on_orphan = "dead", doc/protocol.md §7.32): "o:*" = every class
--       without a handler of its own, "o:!<class>" = except this one, which has one.
-- Returns {-1, 0, 0} when the owner is alive (nothing touched), otherwise
--   {moved, failed, n_unlisted, <n unlisted queue names>, <raw-buried jobs...>}
--   moved  = jobs written somewhere (a queue, the parking list, or raw into dead);
--   failed = jobs that could not be written (rotated to the back of the list);
--   unlisted = queues a job went to that no live process declared in the last 120 s
--              (each name once; SADDed to cogworker:queues);
--   raw-buried = repeat orphans ZADDed raw into dead because parking failed (the caller
--              swaps them for a ProcessDied entry, SWAP_DEAD_ENTRY).
--
-- Order:
--   1. (threshold given) EXISTS presence -> alive; HGET last_beat owner (not a number =
--      absent); a stamp within the threshold of TIME (or ARGV[7]) -> alive.
--   2. Sort the marks; clock = TIME (or ARGV[7]); (dead owner) pcall SMEMBERS of the
--      owner's at-most-once classes.
--   3. LLEN times, at the head: peek LINDEX 0 ->
--      finished: LPOP, pcall DEL counter | keep: LPOP into `kept` |
--      otherwise: (dead owner) a class at most once (owner's set or "o:" marks) -> pcall
--      RPUSH at_most_once_orphans (failing: not written), never requeued; (dead owner,
--      readable jid) pcall GET counter, over the limit -> pcall
--      RPUSH repeat_orphans, else pcall ZADD dead raw -> not parked: pcall requeue_job ->
--      queued: pcall ZSCORE live_queues, stale/missing -> pcall SADD queues -> LPOP ->
--      written: moved+1 (queued from a dead owner: pcall INCR + EXPIRE counter; queued
--      with a readable jid: pcall GET of its settled record, none or the mark -> pcall
--      SET mark EX 604800) / not written: RPUSH to the back, failed+1.
--   4. RPUSH the kept jobs back.
--
-- Why this order:
-- * Liveness and the moves are one atomic call: checked in separate commands, an owner
--   that beat in between would lose jobs it is still running (lesson 28), and two
--   recoverers can never both move a job.
-- * Each job is peeked (LINDEX 0), written (queue / parking / dead), and only then
--   popped: a script stopped by an error keeps its writes, so nothing is removed first.
--   A job that can't be written goes to the back, so it can't block the jobs behind it
--   (lesson 30).
-- * A job of an at-most-once class is parked for burial (Cogworker::ProcessDied, filed by
--   the caller) in the same atomic call that judged its owner dead, so no recoverer can
--   requeue it in between; it is never requeued, even when parking fails (it stays on the
--   list, at the back, for the next pass). The owner's own declaration counts, so the
--   rule holds whichever cogworkerd recovers the list.
-- * The orphan counter is INCRed only after the job was requeued, and only when
--   recovering a dead owner: shutdown requeues never count as orphanings.
-- * Every job put back on a queue gets the mark in its settled record (never in place of
--   an outcome): its success's ack, which sends no DEL of the counter and whose output is
--   not asked about unless the record held something (doc/protocol.md §7.34), then looks
--   closer: a recovered job has a counter, and a stopped or orphaned run may be kept.
-- * Index 0 is the newest fetch and each requeue is an RPUSH, so the oldest-fetched job
--   ends up first in line.
if redis.replicate_commands then pcall(redis.replicate_commands) end -- we read TIME

--@include retake_running_lock
--@include json_top
--@include requeue_job

local list, presence, last_beat, parking, dead, queues, live_queues =
	KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local queue_prefix, default_queue, lock_prefix, lock_ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local owner, threshold, caller_now = ARGV[5], ARGV[6], ARGV[7]
local counter_prefix, counter_ttl = ARGV[8], ARGV[9]
local max_orphanings = tonumber(ARGV[10])
local settled_prefix, settled_mark = ARGV[11], ARGV[12]
local amo_set, amo_parking = KEYS[8] or '', KEYS[9] or ''

-- A finite number, or nil ("garbage", "nan", "inf" all count as no number).
local function finite(v)
	local n = tonumber(v)
	if n and n == n and n ~= math.huge and n ~= -math.huge then return n end
	return nil
end

-- Redis TIME in whole seconds; the caller's epoch when TIME is refused.
local function now_seconds()
	local ok, t = pcall(redis.call, 'TIME')
	if ok and type(t) == 'table' and finite(t[1]) then return finite(t[1]) end
	return finite(caller_now)
end

-- The job's jid when the payload decodes to an object with a non-empty string jid, and
-- its class when that is a string (each nil otherwise).
local function jid_of(raw)
	local ok, job = json_fields(raw)
	if not ok or type(job) ~= 'table' then return nil, nil end
	local jid = type(job.jid) == 'string' and job.jid ~= '' and job.jid or nil
	return jid, type(job.class) == 'string' and job.class or nil
end

-- The orphan counter as a number. A counter that can't be read as an integer (garbage,
-- wrong type) is deleted and counts as 0: a corrupt counter must not switch the limit off.
local function orphanings(counter)
	local ok, v = pcall(redis.call, 'GET', counter)
	if ok and not v then return 0 end
	if ok and type(v) == 'string' and string.match(v, '^%-?%d+$') then return tonumber(v) end
	pcall(redis.call, 'DEL', counter)
	return 0
end

-- Mark the settled record of a job put back (none there, or the mark renewed).
local function mark_settled(jid)
	local key = settled_prefix .. jid
	local ok, s = pcall(redis.call, 'GET', key)
	if ok and (not s or s == settled_mark) then
		pcall(redis.call, 'SET', key, settled_mark, 'EX', counter_ttl)
	end
end

local recovering = threshold ~= ''

-- 1. Liveness, only when a threshold is given.
if recovering then
	if redis.call('EXISTS', presence) == 1 then return {-1, 0, 0} end
	local stamp = finite(redis.call('HGET', last_beat, owner))
	if stamp and now_seconds() - stamp <= tonumber(threshold) then return {-1, 0, 0} end
	-- no usable stamp: the missing presence key alone means "dead"
end

-- 2. The marks, and the clock for the live_queues check.
local finished, keep, at_most_once = {}, {}, {}
for i = 13, #ARGV do
	local mark, raw = string.sub(ARGV[i], 1, 2), string.sub(ARGV[i], 3)
	if mark == 'd:' then finished[raw] = true elseif mark == 'k:' then keep[raw] = true
	elseif mark == 'o:' then at_most_once[raw] = true end
end
local clock = now_seconds()
if recovering and amo_set ~= '' then
	local ok, classes = pcall(redis.call, 'SMEMBERS', amo_set)
	if ok and type(classes) == 'table' then
		for _, c in ipairs(classes) do at_most_once[c] = true end
	end
end

-- 3. Walk the list once, always at its head.
local moved, failed = 0, 0
local kept, unlisted, buried_raw = {}, {}, {}
local listed = {} -- queue name -> true when live, false when reported unlisted
local n = redis.call('LLEN', list)
for _ = 1, n do
	local raw = redis.call('LINDEX', list, 0)
	if not raw then break end
	if finished[raw] then
		redis.call('LPOP', list)
		local jid = jid_of(raw)
		if jid then pcall(redis.call, 'DEL', counter_prefix .. jid) end
	elseif keep[raw] then
		redis.call('LPOP', list)
		kept[#kept + 1] = raw
	else
		local where, queue -- where: 'queue' | 'parked' | 'dead' | nil (not written)
		local jid, class = jid_of(raw)
		local once = recovering and class and (at_most_once[class] or
			(at_most_once['*'] and not at_most_once['!' .. class]))
		if once then
			if amo_parking ~= '' and pcall(redis.call, 'RPUSH', amo_parking, raw) then
				where = 'parked'
			end -- not parked: not written, rotated to the back, retried; never requeued
		elseif recovering and jid and orphanings(counter_prefix .. jid) + 1 > max_orphanings then
			if pcall(redis.call, 'RPUSH', parking, raw) then
				where = 'parked'
			elseif pcall(redis.call, 'ZADD', dead, caller_now, raw) then
				where = 'dead'
				buried_raw[#buried_raw + 1] = raw
			end -- both failed: treated as not parked
		end
		if not where and not once then
			local ok, q = pcall(requeue_job, raw, queue_prefix, default_queue, lock_prefix,
				lock_ttl)
			if ok then where, queue = 'queue', q end
		end
		if where == 'queue' and listed[queue] == nil then
			local ok, score = pcall(redis.call, 'ZSCORE', live_queues, queue)
			local seen = ok and finite(score)
			if seen and seen >= clock - 120 then
				listed[queue] = true
			else
				listed[queue] = false
				pcall(redis.call, 'SADD', queues, queue)
				unlisted[#unlisted + 1] = queue
			end
		end
		redis.call('LPOP', list)
		if where then
			moved = moved + 1
			if where == 'queue' and jid and recovering then
				local counter = counter_prefix .. jid
				pcall(redis.call, 'INCR', counter)
				pcall(redis.call, 'EXPIRE', counter, counter_ttl)
			end
			if where == 'queue' and jid then mark_settled(jid) end
		else
			redis.call('RPUSH', list, raw) -- to the back: retried on the next pass
			failed = failed + 1
		end
	end
end

-- 4. The kept jobs go back onto the list.
for _, raw in ipairs(kept) do redis.call('RPUSH', list, raw) end

-- 5. {moved, failed, n, <n unlisted names>, <raw-buried jobs...>}
local reply = {moved, failed, #unlisted}
for _, q in ipairs(unlisted) do reply[#reply + 1] = q end
for _, raw in ipairs(buried_raw) do reply[#reply + 1] = raw end
return reply
