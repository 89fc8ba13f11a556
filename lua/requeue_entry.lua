-- SPDX-License-Identifier: MIT
-- REQUEUE_ENTRY (doc/protocol.md §6.12): basic-fetch shutdown requeue of one running job (read
-- from cogworker:workers:<self>), with its running lock.
--
-- KEYS: [1] cogworker:queue:<q>  [2] periodic:running:<pjid> (only when flagged)
-- ARGV: [1] payload  [2] jid  [3] lock ttl (whole seconds)  [4] flag: "1" or "true"
--       when the job has periodic_until_executed (anything else: not flagged)
-- Returns 1.
--
-- Order: RPUSH queue payload (front of the line) -> if flagged: retake_running_lock.
-- Why: as two commands, a failure in between left the job queued without its lock
-- (lesson 66).

--@include retake_running_lock

redis.call('RPUSH', KEYS[1], ARGV[1])
local flagged = ARGV[4] == '1' or ARGV[4] == 'true'
if flagged and KEYS[2] and KEYS[2] ~= '' then
	retake_running_lock(KEYS[2], ARGV[2], ARGV[3])
end
return 1
