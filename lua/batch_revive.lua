-- SPDX-License-Identifier: MIT
-- BATCH_REVIVE (doc/protocol.md §6.27): a dead member is retried by hand: pending again,
-- in its batch and, when that batch had settled dead in its parent, up the tree.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] bid  [10] the member's jid
-- Returns the number of batches in which it (or its batch) is pending again.
--
-- Order: SMOVE dead -> pending -> PERSIST the batch's keys -> the parent, with the batch
-- as the member.
-- Why: the batch is not complete while the revived member runs (batch show says so, its
-- keys do not expire under it); its success then settles it as any member's does. The
-- marks of callbacks already fired stay: on_complete and on_death fire once, on_success
-- fires when the revived member brings it about. A member retried by a client that does
-- not call this (the Web UI) still makes on_success fire: BATCH_SETTLE moves a dead member
-- that succeeds to succeeded.
--@include batch
local bid, member, n = ARGV[9], ARGV[10], 0
while bid and bid ~= '' do
	if redis.call('SMOVE', bkey(bid, ':dead'), bkey(bid, ':pending'), member) == 0 then break end
	keep_for(bid, nil)
	n = n + 1
	bid, member = redis.call('HGET', bkey(bid), 'parent'), bid
end
return n
