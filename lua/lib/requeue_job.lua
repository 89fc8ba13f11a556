-- SPDX-License-Identifier: MIT
-- requeue_job(raw, queue_prefix, default_queue, lock_prefix, lock_ttl, back): shared
-- fragment (doc/protocol.md §6.3). Needs retake_running_lock and json_top included before it.
--
-- Puts an already-fetched job back at the FRONT of its queue (RPUSH: consumers take from
-- the right), or at the back when `back` is true (LPUSH: a job a saturated handler gives
-- away must not block the jobs behind it), and returns the queue name it went to.
--   1. pcall-decode the job (json_fields: a job over 1 MiB through its summary; decode
--      only: the original string is what gets pushed);
--   2. queue = its `queue` field when that is a non-empty string, else default_queue
--      (a job whose queue can't be read still has to go somewhere; on `default` the
--      Processor buries it as `(unparseable)`);
--   3. `periodic_until_executed` == true with string `periodic_pjid` and `jid`:
--      retake_running_lock(lock_prefix .. pjid, jid, lock_ttl), BEFORE the push, so a
--      requeued run is never queued without its lock (lesson 66);
--   4. RPUSH (LPUSH when back) the original string onto queue_prefix .. queue.
-- Errors (e.g. WRONGTYPE on the queue or the lock) propagate to the caller.
local function requeue_job(raw, queue_prefix, default_queue, lock_prefix, lock_ttl, back)
	local queue = default_queue
	local ok, job = json_fields(raw)
	if ok and type(job) == 'table' then
		if type(job.queue) == 'string' and job.queue ~= '' then
			queue = job.queue
		end
		if job.periodic_until_executed == true and type(job.periodic_pjid) == 'string'
				and type(job.jid) == 'string' then
			retake_running_lock(lock_prefix .. job.periodic_pjid, job.jid, lock_ttl)
		end
	end
	redis.call(back and 'LPUSH' or 'RPUSH', queue_prefix .. queue, raw)
	return queue
end
