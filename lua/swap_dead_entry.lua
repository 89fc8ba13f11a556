-- SPDX-License-Identifier: MIT
-- SWAP_DEAD_ENTRY (doc/protocol.md §6.10): replace a raw dead entry (a repeat orphan REQUEUE
-- had to bury raw) with its proper ProcessDied entry.
--
-- KEYS: [1] cogworker:dead
-- ARGV: [1] old member (the raw job)  [2] new member (ProcessDied entry)  [3] score
-- Returns 1 when swapped, 0 when the old member is gone.
--
-- Order: ZSCORE old (check) -> ZADD new (write) -> ZREM old (remove).
-- Why: as two commands, both copies could stay in dead, and "retry" on each ran the job
-- twice (lesson 34). (If new == old, the ZREM is skipped: it would remove the entry.)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
if ARGV[2] ~= ARGV[1] then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 1
