-- SPDX-License-Identifier: MIT
-- EXPIRE_IF_OWNED (doc/protocol.md §6.19): re-time an owned key (unique lock or periodic
-- running lock) only when `owner` still holds it. Always run with plain EVAL.
--
-- KEYS: [1] the lock key
-- ARGV: [1] owner jid  [2] ttl (rounded up to a whole second by the caller)
-- Returns 1 when re-timed, 0 when the key is absent or owned by someone else.
--
-- Order: GET key == owner (check) -> EXPIRE key ttl.
-- Why: a stray older run can never shorten or extend a newer run's lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('EXPIRE', KEYS[1], ARGV[2])
	return 1
end
return 0
