-- SPDX-License-Identifier: MIT
-- retake_running_lock(lock, jid, ttl): shared fragment (doc/protocol.md §6.2).
--
-- Makes sure the `until_executed` run `jid` owns its periodic running lock
-- (`periodic:running:<pjid>`) again, without ever stealing a newer run's lock:
--   absent            -> SET lock jid EX ttl   (re-take it)
--   owned by jid      -> EXPIRE lock ttl       (refresh it)
--   owned by another  -> leave it alone
-- ttl must be a whole number of seconds (callers round up).
-- Returns true when jid owns the lock afterwards, false when another run does.
-- Not wrapped in pcall here: callers decide (a damaged lock key raises WRONGTYPE).
local function retake_running_lock(lock, jid, ttl)
	local owner = redis.call('GET', lock)
	if not owner then
		redis.call('SET', lock, jid, 'EX', ttl)
		return true
	end
	if owner == jid then
		redis.call('EXPIRE', lock, ttl)
		return true
	end
	return false
end
