-- SPDX-License-Identifier: MIT
-- CLAIM (doc/protocol.md §6.14): claim a periodic slot; exactly one process wins each slot.
--
-- KEYS: [1] periodic:running:<pjid>  [2] periodic:last_slot:<pjid>
--       [3] periodic:lock:<pjid>:<slot>
-- ARGV: [1] slot (integer epoch seconds)  [2] unique mode ("until_executed" or "")
--       [3] slot lock ttl (20)  [4] jid of the job about to be pushed  [5] queued_ttl
-- Returns 2 when blocked (an until_executed run still holds the running lock), 0 when
-- the slot is not newer than last_slot or another process holds the slot lock, and
-- {1, previous last_slot or ""} when won (the caller keeps `previous` for ROLLBACK).
-- A last_slot that is not a number is an error (the tick fails and is logged; it is not
-- read as 0, which would silently re-fire).
--
-- Order: EXISTS running (until_executed only) -> GET last_slot, compare -> SET slot lock
-- NX EX -> SET last_slot -> SET running lock (until_executed only).
-- Why: last_slot stops the same or an earlier slot from firing again; the NX slot lock
-- breaks the race where two processes both pass the last_slot check. The running lock is
-- written here, BEFORE the job exists: written after the push, a fast job could finish
-- and "release" a lock that did not exist yet, wedging the entry forever (lesson 57).
local running, last_slot, slot_lock = KEYS[1], KEYS[2], KEYS[3]
local slot, mode, slot_ttl, jid, queued_ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local until_executed = mode == 'until_executed'

if until_executed and redis.call('EXISTS', running) == 1 then return 2 end

local previous = redis.call('GET', last_slot)
local previous_n = 0
if previous then
	previous_n = tonumber(previous)
	if not previous_n or previous_n ~= previous_n then
		return redis.error_reply('ERR ' .. last_slot .. ' is not a number')
	end
end
if tonumber(slot) <= previous_n then return 0 end

if not redis.call('SET', slot_lock, '1', 'NX', 'EX', slot_ttl) then return 0 end
redis.call('SET', last_slot, slot)
if until_executed then redis.call('SET', running, jid, 'EX', queued_ttl) end
return {1, previous or ''}
