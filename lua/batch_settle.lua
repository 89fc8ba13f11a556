-- SPDX-License-Identifier: MIT
-- BATCH_SETTLE (doc/protocol.md §6.26): a job settled for good (succeeded, died or was
-- discarded): its settled record, its batch and the jobs that wait for it, at once.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] jid  [10] 'success', 'dead' or 'discarded'
--       [11] its bid ('' = none)
-- Returns {released, buried, more, fired...}: jobs that waited and are now queued, jobs
-- buried as Cogworker::DependencyFailed, 1 when the release was cut at this call's share
-- (lib/batch.lua: the rest is noted in cogworker:batch:owed, and the next call of the same
-- settle goes on with it) else 0, and 'bid kind jid' of each callback pushed.
--
-- Order: SET settled:<jid> EX -> SREM the batch's pending (or SMOVE dead -> succeeded)
-- + SADD its outcome set -> on_death (first death) -> complete: on_complete, on_success,
-- the parent in turn -> each dependant (up to the call's share): SREM after, and the push
-- (LPUSH / ZADD schedule) when it waits for nothing more, or the burial (ZADD dead) that
-- settles in turn; SREM dependants -> HSET owed (some left) or HDEL owed (none).
-- Why: idempotent by construction (sets, marks), so the daemon calls it before the job
-- leaves its in-progress list: a crash in between runs the job again and settles it
-- again, to no effect; called after, a crash would lose it. The settled record lets a
-- later push see the job as done, and the poller (BATCH_EXPIRE) finish what a crash
-- left of a settle made in the ack's round trip.
--@include batch
local outcome = ARGV[10]
if not OUTCOME_SET[outcome] then
	return redis.error_reply('ERR outcome must be success, dead or discarded, not ' .. outcome)
end
local released, buried, more = job_settled(ARGV[9], outcome, ARGV[11])
local reply = { released, buried, more }
for _, f in ipairs(fired) do reply[#reply + 1] = f end
return reply
