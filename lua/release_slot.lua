-- SPDX-License-Identifier: MIT
-- RELEASE_SLOT (doc/protocol.md §6.22): give back a fleet slot taken by ADMIT.
--
-- KEYS: [1] cogworker:limit:<class>
-- ARGV: [1] holder (the member ADMIT added)  [2] caller's epoch (TIME fallback)
-- Returns 1 when the lease was still there, 0 when it had expired and was trimmed (the
--   holder's beats failed for longer than process_ttl) or was never taken.
--
-- Order: ZREM slots holder -> clock = TIME (else ARGV[2]) -> ZREMRANGEBYSCORE slots -inf
-- clock.
-- Why: a lease is named by its holder, so a release can only ever remove its own. The
-- trim of expired leases (of processes that died holding them) keeps the key honest for
-- readers (cogworkerctl limits, the metrics) even while no job of the class is started.
if redis.replicate_commands then pcall(redis.replicate_commands) end -- we read TIME

local removed = redis.call('ZREM', KEYS[1], ARGV[1])
local ok, t = pcall(redis.call, 'TIME')
local now = tonumber(ARGV[2])
if ok and type(t) == 'table' then now = tonumber(t[1]) + tonumber(t[2]) / 1000000 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', now))
return removed
