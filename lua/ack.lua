-- SPDX-License-Identifier: MIT
-- ACK (doc/protocol.md §6.11): a job finished; drop it from the in-progress list.
--
-- KEYS: [1] cogworker:inprogress:<self>  [2] cogworker:orphanings:<jid> (optional:
--       absent or "" when the jid is unknown)
-- ARGV: [1] raw job (as fetched)
-- Returns 1 (also when the job was no longer listed).
--
-- Order: LREM list 1 raw -> pcall DEL counter.
-- Why: a job that got to finish starts its orphan history from zero; the counter is
-- bookkeeping, so a damaged counter key can't fail the ack.
redis.call('LREM', KEYS[1], 1, ARGV[1])
if KEYS[2] and KEYS[2] ~= '' then pcall(redis.call, 'DEL', KEYS[2]) end
return 1
