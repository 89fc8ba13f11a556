-- SPDX-License-Identifier: MIT
-- REFRESH_GROUP_LEASE (doc/protocol.md §6.38): the heartbeat's renewal of one group lease
-- this process holds (fair share, §7.35), with its key's TTL.
--
-- KEYS: [1] cogworker:group_slots:<class>:<group>
-- ARGV: [1] the new expiry (Redis time + process_ttl, six decimals)  [2] the holder
--       (the member ADMIT added)  [3] "1": retake it if it is gone (after a failed beat),
--       else only renew it (XX)  [4] process_ttl in seconds
-- Returns ZADD's reply: 1 when the lease was taken again, else 0.
--
-- Order: ZADD slots [XX] expiry holder -> group_slots_keep (PEXPIREAT past the key's
--   latest member).
-- Why: a lease renewed by plain ZADD, as the fleet's are, would outlive its key once the
--   key has a TTL: a job running longer than the TTL would lose its slot with the key, and
--   its group take one job too many. The TTL goes with the renewal in one step, and from
--   the latest member of the key, so a renewal never shortens what another holder's
--   longer lease needs. XX: a lease released meanwhile is not brought back.
--@include group_slots_keep

local added
if ARGV[3] == '1' then
	added = redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
else
	added = redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[2])
end
group_slots_keep(KEYS[1], tonumber(ARGV[4]))
return added
