-- SPDX-License-Identifier: MIT
-- PEEK_CUT (doc/protocol.md §6.36): the summary of one entry longer than max_job_bytes,
-- which cogworkerctl read with its link's bulk limit (only its length, first and last bytes
-- reached it), so that its class, jid, queue, error and times can be shown and matched.
--
-- KEYS: [1] the key it was read from (a queue, a sorted set of jobs, an in-progress list,
--       a workers hash, a wait hash)
-- ARGV: [1] where: "z" (a sorted set: ARGV[2] its score), "l" (a list: ARGV[2] its index
--       when read), "f" (a hash: ARGV[2] its field) or "h" (a hash: any of its values)
--       [2] that place  [3] its length  [4] its first bytes (up to 256)  [5] its last
--       bytes (up to 64)
-- Returns json_top(entry, 1024): the JSON object of its top-level members whose value text
-- is at most 1024 bytes, byte for byte (a workers entry's "payload" object summarised the
-- same way); "" when it is no object whose top level closes; nil when no entry of that
-- length, head and tail is there (any more).
--
-- Order: look where it was (a list's index first, then the list 100 at a time, as it may
-- have moved) for the entry of that length, head and tail -> walk its top level (no write).
-- Why: the entry never reaches cogworkerctl whole (a 40 MB job in dead cost `jobs list`
-- 327 MiB), so what is shown of it is read here; json_top, not cjson.decode, which holds
-- the server about 2 s for 40 MB (json_top says why).

--@include json_top

local kind, where, len, head, tail = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]

local function same(m)
	return type(m) == 'string' and #m == len and string.sub(m, 1, #head) == head and
	       (#tail == 0 or string.sub(m, -#tail) == tail)
end

local found = nil
local function first_of(list)
	for _, m in ipairs(list) do
		if same(m) then found = m return true end
	end
	return false
end

if kind == 'z' then
	local s = tonumber(where)
	first_of(redis.call('ZRANGEBYSCORE', KEYS[1], s - 0.000001, s + 0.000001))
elseif kind == 'l' then
	local m = redis.call('LINDEX', KEYS[1], tonumber(where))
	if same(m) then
		found = m
	else
		local n, i = redis.call('LLEN', KEYS[1]), 0
		while i < n and not first_of(redis.call('LRANGE', KEYS[1], i, i + 99)) do
			i = i + 100
		end
	end
elseif kind == 'f' then
	local m = redis.call('HGET', KEYS[1], where)
	if same(m) then found = m end
else
	first_of(redis.call('HVALS', KEYS[1]))
end
if not found then return false end
return json_top(found, 1024) or ''
