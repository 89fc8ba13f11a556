-- SPDX-License-Identifier: MIT
-- KILL (`cogworkerctl jobs kill`, doc/protocol.md §7.28): move a schedule or retry entry into
-- dead, atomically. An addition of cogworkerd's (cogworker's Web UI has no such button).
-- Also the poller's burial of a due entry past its deadline (§7.31), which may drop it
-- instead (a discard).
--
-- KEYS: [1] the source ZSET (cogworker:schedule or cogworker:retry)  [2] cogworker:dead
--       [3] cogworker:batch:owed (optional)
-- ARGV: [1] the entry (exact member)  [2] score (now)  [3] the new dead member (built
--       by the caller; may equal the entry; '' = none: the entry is dropped)  [4] its jid
--       [5] its settle still owed, '<outcome> <bid>' (both with KEYS[3])
-- Returns 1 when moved, 0 when the entry is gone.
--
-- Order: ZSCORE entry (check) -> ZADD dead (write) -> HSET owed jid -> ZREM entry (remove).
-- Why: check -> write -> remove, so an error never loses the entry and a second kill of
-- the same entry does nothing. (Should the source be dead itself with an unchanged
-- member, the ZREM is skipped: it would remove the entry just written.) The settle that
-- follows (BATCH_SETTLE) is noted in the same step, so a crash or a failed call before it
-- leaves the note for the poller (§7.34).
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3]) end
if KEYS[3] then redis.call('HSET', KEYS[3], ARGV[4], ARGV[5]) end
if ARGV[3] == '' or KEYS[1] ~= KEYS[2] or ARGV[3] ~= ARGV[1] then
	redis.call('ZREM', KEYS[1], ARGV[1])
end
return 1
