-- SPDX-License-Identifier: MIT
-- ACT_CUT (doc/protocol.md §6.37): a `cogworkerctl jobs` action (or the dashboard's) on an
-- entry read cut (PEEK_CUT): the member is found here, by its place, its length, its first bytes
-- and its jid, and acted on here, since the caller never had it whole.
--
-- KEYS: [1] the sorted set or queue that holds it  [2] retry: cogworker:queue:<q>; kill:
--       cogworker:dead; else KEYS[1]  [3] cogworker:queues
-- ARGV: [1] retry | delete | kill | reschedule  [2] "z" (a sorted set) or "l" (a list)
--       [3] z: its score as listed (found within a microsecond of it)  [4] its length
--       [5] its jid  [6] its first bytes (up to 256)  [7] kill, reschedule: the new score
--       [8] retry: the queue's name
-- Returns 1 when done, 0 when no such entry is there (any more).
--
-- Order: find it (a sorted set: the members of that score; a list: 100 at a time) by length
-- and head, then its jid (json_top's summary decoded: check) -> retry: LPUSH queue (write), ZREM (remove), pcall
-- SADD queues | delete: ZREM, or LSET a mark and LREM the mark | kill: ZADD dead, ZREM |
-- reschedule: ZADD XX.
-- Why: acting by the exact member (ZREM raw, CLAIM_AND_REQUEUE) needs it whole as an
-- argument, which is what cutting avoids; the length and head alone could name another entry
-- with the same beginning, so the jid decides, read from the member itself (json_top, not a
-- cjson.decode of it all, which holds the server about 2 s for 40 MB). A retried
-- job goes back as it is (enqueued_at not re-stamped: the byte-preserving surgery is the
-- caller's, and Lua's cjson rounds large numbers, lesson 7).

--@include json_top

local act, kind, len, jid, head = ARGV[1], ARGV[2], tonumber(ARGV[4]), ARGV[5], ARGV[6]

local function same(m)
	if #m ~= len or string.sub(m, 1, #head) ~= head then return false end
	local top = json_top(m, 1024)
	local ok, obj = pcall(cjson.decode, top or '')
	return ok and type(obj) == 'table' and obj.jid == jid
end

local member, index = nil, nil
if kind == 'z' then
	local s = tonumber(ARGV[3])
	for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], s - 0.000001, s + 0.000001)) do
		if same(m) then member = m break end
	end
else
	local n, i = redis.call('LLEN', KEYS[1]), 0
	while i < n and not member do
		for k, m in ipairs(redis.call('LRANGE', KEYS[1], i, i + 99)) do
			if same(m) then member, index = m, i + k - 1 break end
		end
		i = i + 100
	end
end
if not member then return 0 end

if act == 'retry' then
	redis.call('LPUSH', KEYS[2], member)
	redis.call('ZREM', KEYS[1], member)
	pcall(redis.call, 'SADD', KEYS[3], ARGV[8])
elseif act == 'delete' and kind == 'z' then
	redis.call('ZREM', KEYS[1], member)
elseif act == 'delete' then
	local mark = 'cogworker: a job too large, being deleted ' .. jid
	redis.call('LSET', KEYS[1], index, mark)
	redis.call('LREM', KEYS[1], 1, mark)
elseif act == 'kill' then
	redis.call('ZADD', KEYS[2], ARGV[7], member)
	redis.call('ZREM', KEYS[1], member)
elseif act == 'reschedule' then
	return redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[7], member)
else
	return redis.error_reply('ERR ACT_CUT: no action ' .. tostring(act))
end
return 1
