-- SPDX-License-Identifier: MIT
-- BATCH_PUSH (doc/protocol.md §6.24): push a job that is a batch member, or that waits for
-- other jobs, or both: its membership, its waiting and its push are one step.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] jid  [10] the job's JSON  [11] its queue
--       [12] due time ('' = now; else it goes to the schedule then)  [13] bid ('' = none)
--       [14] jid of the running member adding it ('' = none)  [15] '1': run once the
--       dependencies settled, whatever the outcome (after-any)  [16..] dependency jids
-- Returns {how, unmet}: how is 'queued', 'scheduled' or 'waiting', unmet the number of
-- dependencies not yet settled. An error, with nothing written, when the batch takes no
-- member, a dependency failed (without after-any) or the job names itself.
--
-- Order: checks (the batch's may_add, each dependency's settled record) -> SADD the
-- batch's pending, HINCRBY total -> either the push (LPUSH + SADD queues, or ZADD
-- schedule) or the waiting records: HSET wait, SADD after, SADD each dependants and SET
-- its settled record to WAITED, ZADD waiting.
-- Why: a member is pending before its job exists, so the batch cannot complete between
-- the push and the membership; a dependency's settled record is written in the same
-- atomic step as its release of the jobs that wait for it (BATCH_SETTLE), so a dependency
-- settling now is either seen settled here or sees this job among its dependants: a
-- plain job's success learns that from its ack's SET ... GET of its record, which finds
-- WAITED there (doc/protocol.md §7.34 "Plain jobs pay little").
-- Whether a dependency with no settled record exists at all is the caller's check (it
-- finds it in a queue, set or process before calling).
--@include batch
local jid, raw, queue, at, bid, adder = ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14]
local any = ARGV[15] == '1'
local unmet = {}
if bid ~= '' then
	local why = may_add(bid, adder)
	if why then return redis.error_reply('ERR ' .. why) end
end
for i = 16, #ARGV do
	local dep = ARGV[i]
	if dep == jid then return redis.error_reply('ERR job ' .. jid .. ' cannot wait for itself') end
	local s = settled_as(dep)
	if not s then
		unmet[#unmet + 1] = dep
	elseif s ~= 'success' and not any then
		return redis.error_reply('ERR dependency ' .. dep .. (s == 'dead' and ' died' or
		                         ' was discarded') .. ' (with after-any the job would run)')
	end
end
if bid ~= '' then
	redis.call('SADD', bkey(bid, ':pending'), jid)
	redis.call('HINCRBY', bkey(bid), 'total', 1)
end
if #unmet == 0 then return { push_job(raw, queue, at), 0 } end
redis.call('HSET', K .. 'wait:' .. jid, 'payload', raw, 'queue', queue, 'any', any and '1' or '0',
           'at', at, 'bid', bid)
for _, dep in ipairs(unmet) do
	redis.call('SADD', K .. 'after:' .. jid, dep)
	redis.call('SADD', K .. 'dependants:' .. dep, jid)
	redis.call('SET', K .. 'settled:' .. dep, WAITED, 'EX', KEEP)
end
redis.call('ZADD', K .. 'waiting', NOW, jid)
return { 'waiting', #unmet }
