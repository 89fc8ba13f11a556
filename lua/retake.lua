-- SPDX-License-Identifier: MIT
-- RETAKE (doc/protocol.md §6.13): re-take a periodic running lock after a failed beat (§7.12),
-- so an outage longer than active_ttl does not leave a performing run without its lock.
--
-- KEYS: [1] periodic:running:<pjid>
-- ARGV: [1] jid  [2] ttl (rounded UP to a whole second by the caller)
-- Returns 1 when jid owns the lock afterwards (re-taken or refreshed), 0 when another
-- run owns it (left alone).
--
-- Order: GET lock -> absent: SET jid EX ttl; owned by jid: EXPIRE ttl; else nothing.
-- Why: a run must still own its lock, but must never steal a newer run's lock.

--@include retake_running_lock

if retake_running_lock(KEYS[1], ARGV[1], ARGV[2]) then return 1 end
return 0
