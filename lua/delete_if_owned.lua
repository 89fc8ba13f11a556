-- SPDX-License-Identifier: MIT
-- DELETE_IF_OWNED (doc/protocol.md §6.19): release an owned key (unique lock or periodic
-- running lock) only when `owner` still holds it. Always run with plain EVAL.
--
-- KEYS: [1] the lock key
-- ARGV: [1] owner jid
-- Returns 1 when deleted, 0 when the key is absent or owned by someone else.
--
-- Order: GET key == owner (check) -> DEL key.
-- Why: a stray older run can never release a newer run's lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('DEL', KEYS[1])
	return 1
end
return 0
