-- SPDX-License-Identifier: MIT
-- BATCH_PURGE (doc/protocol.md §6.31): after BATCH_CANCEL, take the member jobs of the
-- cancelled batch (or of a batch under it) out of one queue, the schedule or retry, a
-- window per call, each settled as discarded.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua) or given in ARGV[10].
-- ARGV: [1..8] as every batch script  [9] the cancelled bid  [10] the key swept: a queue
--       (a list) or cogworker:schedule / cogworker:retry (sorted sets)  [11] 'list' or
--       'zset'  [12] the cursor ('0' the first call: a list's index, a ZSCAN cursor)
--       [13] entries looked at per call  [14] a tombstone no job is (a list's removal
--       mark)  [15] "cogworker:job_attempts:" for retry (a job taken out of it loses its
--       list of failures, as jobs delete does), else ''  [16] the most jobs taken out
--       per call (a sorted set: its ZSCAN COUNT)  [17] a list's budget per call in ms (of
--       Redis's clock, TIME: once spent, the call stops where it is)
-- Returns {cursor, removed, locked, fired...}: the next call's cursor ('' when the sweep
-- reached the end), the count of jobs taken out, the exact text of those that hold a lock
-- (unique, periodic: the caller releases it, as jobs delete does), the callbacks their
-- settling pushed elsewhere (batches of jobs that waited for them).
--
-- Order: read the window (LRANGE from the index / ZSCAN) -> pick the jobs whose "bid" is
-- the cancelled batch or one under it (its parents read once per call) -> each: a list's
-- LSET to the tombstone, a sorted set's ZREM and DEL attempts (retry), then job_settled
-- as discarded (its settled record, its batch, the jobs that wait for it) -> a list: one
-- LREM of the tombstones.
-- Why: cogworkerctl found each member by walking every queue and set, twice per member,
-- which never ended for 100 000 members; one pass over each key in windows costs each
-- call a few ms, whatever the key's or the batch's size (doc/performance.md "Batches at
-- scale"): what a call costs is mostly the settles, so it takes out at most ARGV[16]
-- jobs, and on a list stops once its time budget is spent (a host under load settles
-- fewer per call, not slower calls); its one LREM then scans up to the window, so a
-- call that takes many amortises it. A list is walked by index from its head: pushes at the head only make a window
-- look at some entries again, fetches take from the tail; the next index is moved back
-- by what this call removed. A sorted set is walked by ZSCAN, which sees every member
-- that stays, whatever is removed meanwhile. The removal and the settle are one step, so
-- no member is taken out without being counted, nor counted twice (a second sweep finds
-- nothing to take).
if redis.replicate_commands then pcall(redis.replicate_commands) end -- we read TIME
--@include batch
local root, key, kind = ARGV[9], ARGV[10], ARGV[11]
local cursor, n, tomb, attempts = ARGV[12], tonumber(ARGV[13]), ARGV[14], ARGV[15]
local most, budget = tonumber(ARGV[16]), tonumber(ARGV[17])
-- Milliseconds of Redis's clock, or nil when TIME is refused (then only most bounds).
local function clock()
	local ok, t = pcall(redis.call, 'TIME')
	if ok then return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000 end
	return nil
end
local t0 = clock()
local function spent()
	local t = t0 and clock()
	return t ~= nil and t - t0 >= budget
end
local tree = { [root] = true }
local function in_tree(bid)
	local seen, b = {}, bid
	while b and b ~= '' and tree[b] == nil and not seen[b] do
		seen[#seen + 1] = b
		seen[b] = true
		b = redis.call('HGET', bkey(b), 'parent')
	end
	local yes = (b and tree[b]) or false
	for _, s in ipairs(seen) do tree[s] = yes end
	return yes
end
-- The job's jid and bid when it is a member of the tree, else nil.
local function member(raw)
	if not string.find(raw, '"bid":"', 1, true) then return nil end
	local ok, job = pcall(cjson.decode, raw)
	if not ok or type(job) ~= 'table' or type(job.bid) ~= 'string' or
	   type(job.jid) ~= 'string' or not in_tree(job.bid) then
		return nil
	end
	return job.jid, job.bid
end

local taken, locked, next = 0, {}, ''
-- Settled at once (a list's budget counts the settles, most of a call's cost).
local function take(jid, bid, raw)
	taken = taken + 1
	job_settled(jid, 'discarded', bid)
	if string.find(raw, '"unique"', 1, true) or string.find(raw, '"periodic_pjid"', 1, true) then
		locked[#locked + 1] = raw
	end
end
if kind == 'list' then
	local start, seen = tonumber(cursor), 0
	local got = redis.call('LRANGE', key, start, start + n - 1)
	for i, raw in ipairs(got) do
		if taken >= most or (i % 4 == 0 and spent()) then break end
		seen = i
		local jid, bid = member(raw)
		if jid then
			redis.call('LSET', key, start + i - 1, tomb)
			take(jid, bid, raw)
		end
	end
	if taken > 0 then   -- from the nearer end: the scan stops at the last tombstone
		local from_tail = start + seen / 2 > redis.call('LLEN', key) / 2
		redis.call('LREM', key, from_tail and -taken or taken, tomb)
	end
	if #got == n or seen < #got then next = tostring(start + seen - taken) end
else
	local scan = redis.call('ZSCAN', key, cursor, 'COUNT', most)
	for i = 1, #scan[2], 2 do
		local raw = scan[2][i]
		local jid, bid = member(raw)
		if jid and redis.call('ZREM', key, raw) == 1 then
			if attempts ~= '' then redis.call('DEL', attempts .. jid) end
			take(jid, bid, raw)
		end
	end
	if scan[1] ~= '0' then next = scan[1] end
end
local reply = { next, taken, locked }
for _, f in ipairs(fired) do reply[#reply + 1] = f end
return reply
