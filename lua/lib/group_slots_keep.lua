-- SPDX-License-Identifier: MIT
-- group_slots_keep(slots, ttl): shared fragment (doc/protocol.md §2, §7.35) of ADMIT,
-- group_return (RELEASE_GROUP_SLOT, GROUP_SWEEP) and REFRESH_GROUP_LEASE: after a write to
-- a group's slots, the key's TTL.
--
--   slots  cogworker:group_slots:<class>:<group>, members scored by their expiry on Redis's
--          clock (leases, reservations)
--   ttl    process_ttl of the caller, seconds
--
-- Order: ZRANGE slots -1 -1 WITHSCORES (the latest expiry) -> PEXPIREAT slots at that
--   expiry + 2 x ttl (nothing when the key is empty: it is gone already).
-- Why: a group that never gets another job must not keep its key of expired leases
--   forever (a holder that died, its orphan buried rather than re-run, and no look or
--   release after it). Set from the latest member, not from the caller's ttl alone, so a
--   writer with a shorter process_ttl than another holder's never cuts the key under
--   that holder's live lease: whoever writes last, the key outlives every member in it,
--   and each write of a member (its lease taken, renewed, reserved) moves it on. An
--   abandoned key goes 2 x process_ttl after its last lease expired.
local function group_slots_keep(slots, ttl)
	local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
	if last[2] then
		redis.call('PEXPIREAT', slots, math.ceil((tonumber(last[2]) + 2 * ttl) * 1000))
	end
end
