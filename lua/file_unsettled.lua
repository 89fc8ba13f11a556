-- SPDX-License-Identifier: MIT
-- FILE_UNSETTLED (doc/protocol.md §6.9): file one handed-over record from cogworker:unsettled.
--
-- KEYS: [1] cogworker:unsettled  [2] the target set named by the record (validated by
--       the caller)  [3] cogworker:orphanings:<jid> (optional: absent or "")
-- ARGV: [1] the record string (exact)  [2] score  [3] payload
-- Returns 1 when this call filed it, 0 when the record is no longer at the head.
--
-- Order: LINDEX unsettled 0 == record ? (check) -> ZADD target (write) -> LPOP unsettled
-- (remove) -> pcall DEL counter.
-- Why: head-only and write-before-pop; the 1 reply tells exactly one process to run the
-- follow-up (lock release and on_death when filed into dead).
if redis.call('LINDEX', KEYS[1], 0) ~= ARGV[1] then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('LPOP', KEYS[1])
if KEYS[3] and KEYS[3] ~= '' then pcall(redis.call, 'DEL', KEYS[3]) end
return 1
