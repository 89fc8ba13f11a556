-- SPDX-License-Identifier: MIT
-- BATCH_EXPIRE (doc/protocol.md §6.29): the poller's look at batches and waiting jobs:
-- uncommitted batches past their time expire; a dependency settled without releasing the
-- jobs that wait for it is settled again.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] the most batches and waiting jobs to look at
-- Returns {expired, resettled, fired...}: expired is a flat list of bid, pending count
-- pairs (for the log line that says so), resettled the number of dependencies settled
-- again, fired the callbacks pushed by that.
--
-- Order: ZRANGEBYSCORE open up to now -> for each still open: HSET state expired, keep
-- TTLs -> ZREM open; then the oldest waiting jobs: each dependency with a settled record
-- -> job_settled again (its batch left out: its own settle did that, before its ack).
-- Why: an uncommitted batch can never complete, and would keep its keys for ever; the
-- settle of a plain job's success rides on its ack's round trip (settled record first,
-- the dependants' release after), and a crash between the two leaves the record: this
-- finds it within the record's lifetime.
--@include batch
local limit = tonumber(ARGV[9])
local expired, resettled = {}, 0
for _, bid in ipairs(redis.call('ZRANGEBYSCORE', K .. 'open', '-inf', NOW, 'LIMIT', 0, limit)) do
	if redis.call('HGET', bkey(bid), 'state') == 'open' then
		redis.call('HSET', bkey(bid), 'state', 'expired', 'expired_at', NOW)
		keep_for(bid, KEEP)
		expired[#expired + 1] = bid
		expired[#expired + 1] = redis.call('SCARD', bkey(bid, ':pending'))
	end
	redis.call('ZREM', K .. 'open', bid)
end
for _, w in ipairs(redis.call('ZRANGE', K .. 'waiting', 0, limit - 1)) do
	for _, dep in ipairs(redis.call('SMEMBERS', K .. 'after:' .. w)) do
		local s = redis.call('GET', K .. 'settled:' .. dep)
		if s then
			job_settled(dep, s, '')
			resettled = resettled + 1
		end
	end
end
local reply = { expired, resettled }
for _, f in ipairs(fired) do reply[#reply + 1] = f end
return reply
