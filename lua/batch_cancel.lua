-- SPDX-License-Identifier: MIT
-- BATCH_CANCEL (doc/protocol.md §6.28): cancel a batch: no callback fires in it or under
-- it any more; it settles in its parent as discarded; its members are walked a chunk per
-- call, each waiting one settled as discarded, child batches handed back to be cancelled
-- in turn.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] bid  [10] the walk's SSCAN cursor ('' = the
--       first call: cancel it, then walk from 0)  [11] members to look at per call
-- Returns {status, cursor, children, jobs, discarded, fired...}: status 'cancelled' (now),
-- 'again' (it was cancelled already: the walk is done again), 'complete' (a committed
-- batch with nothing pending: nothing done, it stays complete) or 'walk' (a later call);
-- cursor the next call's ('0': the walk is over); children the child batches met, to
-- cancel in turn; jobs the jids of member jobs met still pending (queued, scheduled,
-- retrying or running: the caller deletes or cancels them); discarded the count of
-- waiting members settled now; fired the callbacks its settling pushed elsewhere (the
-- parent's, those of batches of jobs that waited for a member). An error when the batch
-- does not exist.
--
-- Order: (first call) HSET state cancelled, cancelled_at -> ZREM open -> keep TTLs ->
-- settle it in its parent as discarded; then SSCAN pending from cursor, for each member
-- still pending: a child batch is handed back; a waiting job leaves its waiting records
-- (waiter_gone) and settles as discarded (job_settled: its settled record, the batch,
-- the jobs that wait for it); a job is handed back.
-- Why: the state is what every firing checks, up the tree (fire's under_cancel), so once
-- the first call ran nothing fires in the batch or its children, whatever the members and
-- the rest of the walk still do; a walk in chunks keeps each call short whatever the
-- batch's size (doc/performance.md). A waiting member has no other home, so it is settled
-- here, as a job deleted by hand: what waits for it is released or buried by the one rule
-- of job_settled, and its dependants set goes. A completed batch is left as it is: it
-- has nothing to cancel, and its callbacks have fired.
--@include batch
local bid, cursor, count = ARGV[9], ARGV[10], tonumber(ARGV[11])
local status = 'walk'
if cursor == '' then
	local state = redis.call('HGET', bkey(bid), 'state')
	if not state then return redis.error_reply('ERR batch ' .. bid .. ' does not exist') end
	if state == 'committed' and redis.call('SCARD', bkey(bid, ':pending')) == 0 then
		return { 'complete', '0', {}, {}, 0 }
	end
	status = state == 'cancelled' and 'again' or 'cancelled'
	redis.call('HSET', bkey(bid), 'state', 'cancelled')
	if status == 'cancelled' then redis.call('HSET', bkey(bid), 'cancelled_at', NOW) end
	redis.call('ZREM', K .. 'open', bid)
	keep_for(bid, KEEP)
	local parent = redis.call('HGET', bkey(bid), 'parent')
	batch_settled(parent, bid, 'discarded')
	cursor = '0'
end
local scan = redis.call('SSCAN', bkey(bid, ':pending'), cursor, 'COUNT', count)
local children, jobs, discarded = {}, {}, 0
for _, m in ipairs(scan[2]) do
	if redis.call('SISMEMBER', bkey(bid, ':pending'), m) == 0 then
		-- settled meanwhile (a waiting member buried by one met before it)
	elseif redis.call('EXISTS', bkey(m)) == 1 then
		children[#children + 1] = m
	elseif redis.call('EXISTS', K .. 'wait:' .. m) == 1 then
		waiter_gone(m)
		job_settled(m, 'discarded', bid)
		discarded = discarded + 1
	else
		jobs[#jobs + 1] = m
	end
end
local reply = { status, scan[1], children, jobs, discarded }
for _, f in ipairs(fired) do reply[#reply + 1] = f end
return reply
