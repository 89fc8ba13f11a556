-- SPDX-License-Identifier: MIT
-- BATCH_EXPIRE (doc/protocol.md §6.29): the poller's look at batches and waiting jobs:
-- uncommitted batches past their time expire and settle in their parent; a dependency
-- settled without releasing the jobs that wait for it is settled again; the batch list
-- loses the batches whose keys expired. The waiting jobs and the list are looked at a
-- window per call, each from where the last call stopped.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] the most batches to expire  [10] where the look
--       at waiting jobs goes on ('' = from the oldest; else the last call's cursor)
--       [11] the most waiting jobs to look at  [12] where the look at the list goes on
--       [13] the most listed batches to look at
-- Returns {expired, resettled, waiting cursor, list cursor, fired...}: expired is a flat
-- list of bid, pending count pairs (for the log line that says so), resettled the number
-- of dependencies settled again, the cursors what the next call passes as ARGV[10] and
-- [12] ('' once a window reached the end: the next starts over), fired the callbacks
-- pushed by all that.
--
-- Order: ZRANGEBYSCORE open up to now -> for each still open: HSET state expired, keep
-- TTLs, settle it in its parent as dead -> ZREM open; then the window of waiting jobs:
-- each dependency with a settled record -> job_settled again (its batch left out: its own
-- settle did that, before its ack); then the window of the list: ZREM each bid whose hash
-- is gone.
-- Why: an uncommitted batch can never complete, and would keep its keys and its parent
-- for ever; the settle of a plain job's success rides on its ack's round trip (settled
-- record first, the dependants' release after), and a crash between the two leaves the
-- record: this finds it within the record's lifetime, wherever the job waits among any
-- number of jobs stuck for good (a window that moves on, not the oldest ones only); the
-- list is written once per batch and read by its newest entries only, so without this it
-- would grow for ever. A cursor is "score member" of the last one looked at: the next
-- window starts after that member (its rank now), or, when it left, after its score.
--@include batch

-- The next window of n members of zset key after cursor; the members and the cursor
-- for the next call ('' when this window reached the end).
local function window(key, cursor, n)
	local start = 0
	if cursor ~= '' then
		local score, member = string.match(cursor, '^(%S+) (.*)$')
		local rank = member and redis.call('ZRANK', key, member)
		if rank then start = rank + 1
		elseif score then start = redis.call('ZCOUNT', key, '-inf', '(' .. score) end
	end
	local got = redis.call('ZRANGE', key, start, start + n - 1, 'WITHSCORES')
	local members = {}
	for i = 1, #got, 2 do members[#members + 1] = got[i] end
	if #members < n then return members, '' end
	return members, got[#got] .. ' ' .. got[#got - 1]
end

local limit = tonumber(ARGV[9])
local expired, resettled = {}, 0
for _, bid in ipairs(redis.call('ZRANGEBYSCORE', K .. 'open', '-inf', NOW, 'LIMIT', 0, limit)) do
	if redis.call('HGET', bkey(bid), 'state') == 'open' then
		redis.call('HSET', bkey(bid), 'state', 'expired', 'expired_at', NOW)
		keep_for(bid, KEEP)
		expired[#expired + 1] = bid
		expired[#expired + 1] = redis.call('SCARD', bkey(bid, ':pending'))
		batch_settled(redis.call('HGET', bkey(bid), 'parent'), bid, 'dead')
	end
	redis.call('ZREM', K .. 'open', bid)
end
local waiters, wait_next = window(K .. 'waiting', ARGV[10], tonumber(ARGV[11]))
for _, w in ipairs(waiters) do
	for _, dep in ipairs(redis.call('SMEMBERS', K .. 'after:' .. w)) do
		local s = settled_as(dep)
		if s then
			job_settled(dep, s, '')
			resettled = resettled + 1
		end
	end
end
local listed, list_next = window(K .. 'list', ARGV[12], tonumber(ARGV[13]))
for _, bid in ipairs(listed) do
	if redis.call('EXISTS', bkey(bid)) == 0 then redis.call('ZREM', K .. 'list', bid) end
end
local reply = { expired, resettled, wait_next, list_next }
for _, f in ipairs(fired) do reply[#reply + 1] = f end
return reply
