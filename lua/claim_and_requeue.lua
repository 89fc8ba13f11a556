-- SPDX-License-Identifier: MIT
-- CLAIM_AND_REQUEUE (doc/protocol.md §6.16): graduate a schedule/retry entry onto its queue
-- (Scheduled poller), or put a retry/dead entry back (`cogworkerctl jobs retry`).
--
-- KEYS: [1] the source ZSET (cogworker:schedule, cogworker:retry or cogworker:dead)
--       [2] cogworker:queues  [3] cogworker:queue:<q>
-- ARGV: [1] the entry (exact member)  [2] the new payload (built by the caller, with
--       enqueued_at re-stamped)  [3] the queue name
-- Returns 1 ("requeued"), or 0 ("gone": someone else took it).
--
-- Order: ZSCORE entry (check) -> LPUSH queue payload (write) -> ZREM entry (remove) ->
-- pcall SADD queues name (bookkeeping).
-- Why: ZREM then LPUSH lost the job on a crash in between, and ZREM then a failing LPUSH
-- in one script lost it too (lesson 6). The caller builds the payload because Lua's
-- cjson rounds large integers (lesson 7). The ZSCORE gate makes a double retry queue
-- the job once.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('LPUSH', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[1], ARGV[1])
pcall(redis.call, 'SADD', KEYS[2], ARGV[3])
return 1
