-- SPDX-License-Identifier: MIT
-- ROLLBACK (doc/protocol.md §6.15): undo a won CLAIM whose push then failed.
--
-- KEYS: [1] periodic:last_slot:<pjid>  [2] periodic:lock:<pjid>:<slot>
--       [3] periodic:running:<pjid>
-- ARGV: [1] slot  [2] previous last_slot as CLAIM returned it ("" if none)  [3] jid
-- Returns 1 (the rollback is done, even when a damaged key had to be skipped).
--
-- Order: pcall GET last_slot; if it still equals slot: SET it to previous, or to
-- slot - 1 when previous is "" -> DEL the slot lock -> pcall GET running; if it equals
-- jid: pcall DEL it.
-- Why: a later slot claimed meanwhile is left untouched. slot - 1 rather than DEL: with
-- catch-up off a missing last_slot would be re-primed to this very slot and the slot
-- lost. The lock release is in the same script because a separate release made first
-- failed whenever Redis was down and skipped the rollback (lesson 58). The pcalls mean a
-- damaged key can't make an applied rollback count as failed.
local last_slot, slot_lock, running = KEYS[1], KEYS[2], KEYS[3]
local slot, previous, jid = ARGV[1], ARGV[2], ARGV[3]

local ok, current = pcall(redis.call, 'GET', last_slot)
if ok and current == slot then
	if previous ~= '' then
		redis.call('SET', last_slot, previous)
	else
		redis.call('SET', last_slot, string.format('%d', tonumber(slot) - 1))
	end
end
redis.call('DEL', slot_lock)
local ok2, owner = pcall(redis.call, 'GET', running)
if ok2 and owner == jid then pcall(redis.call, 'DEL', running) end
return 1
