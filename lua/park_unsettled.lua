-- SPDX-License-Identifier: MIT
-- PARK_UNSETTLED (doc/protocol.md §6.8): at shutdown, hand over a filing that failed.
--
-- KEYS: [1] cogworker:inprogress:<self>  [2] cogworker:unsettled
-- ARGV: [1] raw job (as fetched)  [2] the record JSON {"set","score","payload"} (built
--       by the caller)
-- Returns 1 when parked, 0 when the job is no longer on the list.
--
-- Order: LPOS list raw (check) -> RPUSH unsettled record (write) -> LREM list 1 raw
-- (remove).
-- Why: a failure that could not be filed must neither be lost nor be requeued (requeued,
-- a retry:false job ran again on every deploy, lesson 24).
if not redis.call('LPOS', KEYS[1], ARGV[1]) then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('LREM', KEYS[1], 1, ARGV[1])
return 1
