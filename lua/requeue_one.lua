-- SPDX-License-Identifier: MIT
-- REQUEUE_ONE (doc/protocol.md §6.6): give back an unstarted job, or requeue a stray, from the
-- process's own in-progress list.
--
-- KEYS: [1] cogworker:inprogress:<self>
-- ARGV: [1] raw job  [2] cogworker:queue:  [3] default  [4] periodic:running:
--       [5] lock ttl (whole seconds)  [6] "back" (optional): to the back of the queue
--       (LPUSH), for a job a saturated handler gives away (§7.30); else the front
-- Returns 1 when the job was requeued, 0 when it is not on the list (any more).
--
-- Order: LPOS list raw (check) -> requeue_job (re-take the running lock, RPUSH onto its
-- queue: write) -> LREM list 1 raw (remove).
-- Why: check -> write -> remove, so an error never loses the job; the lock re-take
-- travels with the push (lesson 66).

--@include retake_running_lock
--@include json_top
--@include requeue_job

if not redis.call('LPOS', KEYS[1], ARGV[1]) then return 0 end
requeue_job(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6] == 'back')
redis.call('LREM', KEYS[1], 1, ARGV[1])
return 1
