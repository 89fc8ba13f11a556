-- SPDX-License-Identifier: MIT
-- BURY_ORPHAN (doc/protocol.md §6.5): file a parked repeat orphan into dead.
--
-- KEYS: [1] cogworker:repeat_orphans  [2] cogworker:dead  [3] cogworker:batch:owed
--       (optional: absent when the job has no jid)
-- ARGV: [1] the raw parked job  [2] score (now)  [3] the ProcessDied entry (built by
--       the caller; scripts never re-encode payloads)  [4] its jid  [5] its settle still
--       owed, '<outcome> <bid>' (both with KEYS[3])
-- Returns 1 when this call filed it, 0 when the job is no longer at the head.
--
-- Order: LINDEX repeat_orphans 0 == raw ? -> ZADD dead -> HSET owed jid -> LPOP
-- repeat_orphans.
-- Why: head-only (no LPOS) so it also works with basic fetch on Redis < 6.0.6; write
-- before pop; the 1/0 reply picks the one process that runs the follow-up (counts, lock
-- release, on_death), so concurrent buriers make exactly one dead entry. The job's settle
-- in its batch and for the jobs that wait for it (BATCH_SETTLE, right after) is noted in
-- the same step: a crash or a failed call before it leaves the note, which the poller
-- settles (§7.34).
if redis.call('LINDEX', KEYS[1], 0) ~= ARGV[1] then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if KEYS[3] then redis.call('HSET', KEYS[3], ARGV[4], ARGV[5]) end
redis.call('LPOP', KEYS[1])
return 1
