-- SPDX-License-Identifier: MIT
-- INTERRUPT (doc/protocol.md §6.7): file a ran-and-failed job from the in-progress list into
-- retry or dead.
--
-- KEYS: [1] cogworker:inprogress:<self>  [2] target ZSET (cogworker:retry or
--       cogworker:dead)  [3] cogworker:orphanings:<jid> (optional: absent or "" when
--       the jid is unknown)
-- ARGV: [1] raw job (as fetched)  [2] score  [3] the new payload (built by the caller)
-- Returns 1 when filed, 0 when the job is no longer on the list (a shutdown requeue
-- already took it).
--
-- Order: LPOS list raw (check) -> ZADD target (write) -> LREM list 1 raw (remove) ->
-- pcall DEL counter.
-- Why: the job leaves the in-progress list only once it is safely filed; filing a
-- finished job also ends its orphan history (bookkeeping, hence pcall).
if not redis.call('LPOS', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('LREM', KEYS[1], 1, ARGV[1])
if KEYS[3] and KEYS[3] ~= '' then pcall(redis.call, 'DEL', KEYS[3]) end
return 1
