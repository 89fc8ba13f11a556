-- SPDX-License-Identifier: MIT
-- BURY (doc/protocol.md §6.17): the Scheduled poller files a schedule/retry entry that is not a
-- job into dead, as an `(unparseable)` wrapper.
--
-- KEYS: [1] the source ZSET  [2] cogworker:dead  [3] cogworker:stats:failed
-- ARGV: [1] the entry (exact member)  [2] score (now)  [3] the wrapper (built by the
--       caller)
-- Returns 1 when buried, 0 when the entry is gone.
--
-- Order: ZSCORE entry (check) -> ZADD dead wrapper (write) -> ZREM entry (remove) ->
-- pcall INCR stats:failed (bookkeeping).
-- Why: an entry that can never graduate must leave the due range without being lost
-- (lesson 5).
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZREM', KEYS[1], ARGV[1])
pcall(redis.call, 'INCR', KEYS[3])
return 1
