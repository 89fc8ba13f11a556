-- SPDX-License-Identifier: MIT
-- BATCH_CANCEL (doc/protocol.md §6.28): cancel a batch and its child batches: no callback
-- fires any more; jobs that wait for dependencies are deleted here.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] bid
-- Returns the jids of the member jobs still pending (queued, scheduled, retrying or
-- running): the caller deletes or cancels them. An error when the batch does not exist.
--
-- Order: for the batch, then each child batch pending in it: HSET state cancelled,
-- cancelled_at -> ZREM open -> each pending member that waits: its waiting records go
-- (waiter_gone) -> keep TTLs.
-- Why: the state is what every firing checks (complete() wants committed, a death fires
-- only in an open or committed batch), so once this step ran nothing fires, whatever the
-- members still do; a waiting member has no other home, so it is deleted here.
--@include batch
if not redis.call('HGET', bkey(ARGV[9]), 'state') then
	return redis.error_reply('ERR batch ' .. ARGV[9] .. ' does not exist')
end
local work, i, jobs = { ARGV[9] }, 1, {}
while work[i] do
	local bid = work[i]
	i = i + 1
	redis.call('HSET', bkey(bid), 'state', 'cancelled', 'cancelled_at', NOW)
	redis.call('ZREM', K .. 'open', bid)
	for _, m in ipairs(redis.call('SMEMBERS', bkey(bid, ':pending'))) do
		if redis.call('EXISTS', bkey(m)) == 1 then
			work[#work + 1] = m
		elseif redis.call('EXISTS', K .. 'wait:' .. m) == 1 then
			waiter_gone(m)
		else
			jobs[#jobs + 1] = m
		end
	end
	keep_for(bid, KEEP)
end
return jobs
