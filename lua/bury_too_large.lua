-- SPDX-License-Identifier: MIT
-- BURY_TOO_LARGE (doc/protocol.md §6.30): a job longer than max_job_bytes, which the fetch
-- took without reading it (only its length, first and last bytes were seen), goes to dead
-- as an `(unparseable)` wrapper.
--
-- KEYS: [1] cogworker:inprogress:<self> (or a parking list of orphan recovery, whose read
--       did not read it either)  [2] cogworker:dead
-- ARGV: [1] the job's length in bytes  [2] its first bytes  [3] its last bytes
--       [4] score (now)  [5] the wrapper (built by the caller)
--       [6] "1" when the fetch took it off every list already (basic fetch), else "0"
-- Returns 1 when buried, 0 when no such job is on the list (any more).
--
-- Order: find the job on the list, the first of that length, head and tail (check) ->
-- ZADD dead wrapper (write) -> LSET it to a mark, LREM the mark (remove).
-- Why: the job never reaches the daemon whole (a hostile push can be 512 MB), so it is
-- found by what the daemon saw of it, and removed by its place: LREM by value would need
-- it whole as an argument.

local len, head, tail = tonumber(ARGV[1]), ARGV[2], ARGV[3]
if ARGV[6] == '1' then
	redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
	return 1
end
local found = nil
for i = 0, redis.call('LLEN', KEYS[1]) - 1 do
	local job = redis.call('LINDEX', KEYS[1], i)
	if job and #job == len and string.sub(job, 1, #head) == head and
	    (#tail == 0 or string.sub(job, -#tail) == tail) then
		found = i
		break
	end
end
if not found then return 0 end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
local mark = 'cogworker: a job too large, being buried ' .. ARGV[4]
redis.call('LSET', KEYS[1], found, mark)
redis.call('LREM', KEYS[1], 1, mark)
return 1
