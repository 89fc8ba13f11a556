-- SPDX-License-Identifier: MIT
-- BATCH_REVIVE (doc/protocol.md §6.27): a dead member is retried by hand: put back on its
-- queue and pending again, in its batch and, when that batch had settled dead in its
-- parent, up the tree, in one step.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] bid  [10] the member's jid  [11] its entry in
--       dead (the exact member)  [12] the payload put back (built by the caller, with
--       enqueued_at re-stamped)  [13] its queue
-- Returns the number of batches in which it (or its batch) is pending again, or -1 when
-- the entry is gone from dead (someone else took it): nothing done.
--
-- Order: ZSCORE the entry (gate) -> the batch's state (a cancelled or expired one stops
-- the walk) -> SMOVE dead -> pending -> PERSIST the batch's keys -> the parent, with the
-- batch as the member -> LPUSH queue + SADD queues -> ZREM the entry.
-- Why: the member is pending before its job can run again, in the same atomic step as its
-- return to the queue. Requeued first and revived after, a run that died again in between
-- settled while the member was still dead (nothing to do), and the revive then left it
-- pending for good, its batch and its parent with it. The batch is not complete while the
-- revived member runs (batch show says so, its keys do not expire under it); its success
-- then settles it as any member's does. The marks of callbacks already fired stay:
-- on_complete and on_death fire once, on_success fires when the revived member brings it
-- about. A member retried by a client that does not call this (the Web UI) still makes
-- on_success fire: BATCH_SETTLE moves a dead member that succeeds to succeeded. The
-- caller builds the payload because Lua's cjson rounds large integers (lesson 7). A batch
-- cancelled or expired is finished for good: made pending again it could never complete,
-- and its parent (where it settled as discarded or dead) would wait for ever; its
-- member's success still moves it to succeeded.
--@include batch
local bid, member, entry, payload, queue = ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13]
if not redis.call('ZSCORE', DEAD, entry) then return -1 end
local n = 0
while bid and bid ~= '' do
	local state = redis.call('HGET', bkey(bid), 'state')
	if state ~= 'open' and state ~= 'committed' then break end
	if redis.call('SMOVE', bkey(bid, ':dead'), bkey(bid, ':pending'), member) == 0 then break end
	keep_for(bid, nil)
	n = n + 1
	bid, member = redis.call('HGET', bkey(bid), 'parent'), bid
end
push_job(payload, queue, '')
redis.call('ZREM', DEAD, entry)
return n
