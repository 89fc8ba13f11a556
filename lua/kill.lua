-- SPDX-License-Identifier: MIT
-- KILL (`cogworkerctl jobs kill`, doc/protocol.md §7.28): move a schedule or retry entry into
-- dead, atomically. An addition of cogworkerd's (cogworker's Web UI has no such button).
--
-- KEYS: [1] the source ZSET (cogworker:schedule or cogworker:retry)  [2] cogworker:dead
-- ARGV: [1] the entry (exact member)  [2] score (now)  [3] the new dead member (built
--       by the caller; may equal the entry)
-- Returns 1 when moved, 0 when the entry is gone.
--
-- Order: ZSCORE entry (check) -> ZADD dead (write) -> ZREM entry (remove).
-- Why: check -> write -> remove, so an error never loses the entry and a second kill of
-- the same entry does nothing. (Should the source be dead itself with an unchanged
-- member, the ZREM is skipped: it would remove the entry just written.)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if KEYS[1] ~= KEYS[2] or ARGV[3] ~= ARGV[1] then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 1
