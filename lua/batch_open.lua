-- SPDX-License-Identifier: MIT
-- BATCH_OPEN (doc/protocol.md §6.23): create a batch, open for members; a child batch
-- becomes a member of its parent in the same step.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua says how, §2 lists them).
-- ARGV: [1..8] as every batch script (lib/batch.lua)  [9] bid  [10] description
--       [11] on_success class  [12] on_complete class  [13] on_death class ('' = none)
--       [14] callback args (a JSON array's text)  [15] callback queue  [16] epoch when it
--       expires uncommitted  [17] parent bid ('' = none)  [18] jid of the running member of
--       the parent that opens it ('' = none)
-- Returns 1; an error naming the reason when the bid exists or the parent takes no member.
--
-- Order: EXISTS bid -> the parent's may_add -> SADD the parent's pending, HINCRBY its
-- total -> HSET the batch -> ZADD list, ZADD open.
-- Why: the child is pending in its parent before it exists, so the parent can never see
-- everything settled while a child it is about to have is not yet there; a check failing
-- has written nothing.
--@include batch
local bid, parent, adder = ARGV[9], ARGV[17], ARGV[18]
if redis.call('EXISTS', bkey(bid)) == 1 then
	return redis.error_reply('ERR batch ' .. bid .. ' exists')
end
if parent ~= '' then
	local why = may_add(parent, adder)
	if why then return redis.error_reply('ERR ' .. why) end
	redis.call('SADD', bkey(parent, ':pending'), bid)
	redis.call('HINCRBY', bkey(parent), 'total', 1)
end
redis.call('HSET', bkey(bid), 'state', 'open', 'description', ARGV[10], 'created_at', NOW,
           'on_success', ARGV[11], 'on_complete', ARGV[12], 'on_death', ARGV[13],
           'callback_args', ARGV[14], 'callback_queue', ARGV[15], 'expires_at', ARGV[16],
           'parent', parent, 'total', 0)
redis.call('ZADD', K .. 'list', NOW, bid)
redis.call('ZADD', K .. 'open', ARGV[16], bid)
return 1
