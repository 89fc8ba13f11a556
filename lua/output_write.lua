-- SPDX-License-Identifier: MIT
-- OUTPUT_WRITE (doc/protocol.md §6.20): keep a run's output and its record
-- (doc/protocol.md §7.29).
--
-- KEYS: [1] cogworker:output:<jid> (the job's runs: field "last" = the newest run number,
--       field "<n>" = run n's record); run n's text is in KEYS[1] .. ':' .. n
-- ARGV: [1] run number, 0 for a run not written yet (a number is allocated)
--       [2] "a": append [3] to the text; "s": [3] replaces the text
--       [3] output bytes  [4] the run record (JSON)  [5] runs kept per job (>= 1)
--       [6] TTL in seconds of what is written
--       [7] the run's token (its process and start time), kept as "<n> <token>" in the
--           field "token": a run numbered by another process (an older one writes no
--           token) never matches
-- Returns the run number.
--
-- Order: (new run) HINCRBY last -> HDEL + DEL the runs that fall outside the cap ->
-- APPEND or SET the text -> HSET the record -> EXPIRE both.
-- Why: one call per write, so a run is numbered, trimmed and written together and a
-- reader never sees a record without its text; numbering in Redis (not from retry_count)
-- counts every run written, a recovered orphan's too. The trim walks down from the first run
-- outside the cap while records exist, so lowering the cap (a reload) trims the older
-- runs at the next run. Each write renews the TTL of the job's runs and of this text.
-- A first write sent again because its reply was lost (the call ran, the writer never
-- heard) carries the token the newest run was numbered with: it finds that run instead of
-- numbering one more, which would leave the first for ever "running".
local idx = KEYS[1]
local n = tonumber(ARGV[1])
local ttl = tonumber(ARGV[6])
local token = ARGV[7] or ''
if n == 0 then
  local last = redis.call('HGET', idx, 'last')
  if last and token ~= '' and redis.call('HGET', idx, 'token') == last .. ' ' .. token then
    n = tonumber(last)
  end
end
if n == 0 then
  n = redis.call('HINCRBY', idx, 'last', 1)
  redis.call('HSET', idx, 'token', n .. ' ' .. token)
  local old = n - tonumber(ARGV[5])
  while old >= 1 and redis.call('HEXISTS', idx, tostring(old)) == 1 do
    redis.call('HDEL', idx, tostring(old))
    redis.call('DEL', idx .. ':' .. old)
    old = old - 1
  end
end
local text = idx .. ':' .. n
if ARGV[2] == 's' then
  redis.call('SET', text, ARGV[3])
else
  redis.call('APPEND', text, ARGV[3])
end
redis.call('HSET', idx, tostring(n), ARGV[4])
redis.call('EXPIRE', text, ttl)
redis.call('EXPIRE', idx, ttl)
return n
