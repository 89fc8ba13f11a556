-- SPDX-License-Identifier: MIT
-- FETCH (doc/protocol.md §6.1): reliable fetch over several queues in one round trip.
--
-- KEYS: [1..n-1] cogworker:queue:<q> in try order, [n] cogworker:inprogress:<self>
-- ARGV: none
-- Returns {queue key, raw job} for the first queue that had a job, or nil when every
-- queue is empty.
--
-- Order: for each queue in order, LMOVE queue -> in-progress RIGHT LEFT (take the oldest
-- job, which becomes index 0 = newest fetch of the in-progress list). LMOVE is itself the
-- atomic check -> write -> remove, so the job is never out of both lists.
-- Why a script: LMOVE/BLMOVE take from one list only; a blocking wait across several
-- weighted queues is impossible, so one call tries them all.
local inprogress = KEYS[#KEYS]
for i = 1, #KEYS - 1 do
	local job = redis.call('LMOVE', KEYS[i], inprogress, 'RIGHT', 'LEFT')
	if job then
		return {KEYS[i], job}
	end
end
return false -- every queue empty: a nil reply
