-- SPDX-License-Identifier: MIT
-- BATCH_COMMIT (doc/protocol.md §6.25): no more members from outside; the batch may now
-- complete, and does at once when nothing is pending.
--
-- KEYS: none: every key is computed from ARGV[1] (lib/batch.lua).
-- ARGV: [1..8] as every batch script  [9] bid
-- Returns {1, fired...} when committed now, {0} when it was committed already; fired
-- lists 'bid kind jid' of each callback pushed. An error when the batch does not exist
-- or was cancelled or expired.
--
-- Order: HGET state -> HSET state committed, committed_at -> ZREM open -> on_death when a
-- member died before -> complete (fire on_complete, on_success; keep TTLs) -> settle it
-- in its parent, up the tree.
-- Why: until committed a batch with nothing pending is only empty for now (the next
-- member may be on its way), and one not committed in time expires and fires nothing, so
-- no callback can fire before this step; after it the last settle, or this step when
-- nothing is pending, fires them. A death before the commit fires on_death here, once.
--@include batch
local bid = ARGV[9]
local state = redis.call('HGET', bkey(bid), 'state')
if not state then return redis.error_reply('ERR batch ' .. bid .. ' does not exist') end
if state == 'committed' then return { 0 } end
if state ~= 'open' then return redis.error_reply('ERR batch ' .. bid .. ' is ' .. state) end
redis.call('HSET', bkey(bid), 'state', 'committed', 'committed_at', NOW)
redis.call('ZREM', K .. 'open', bid)
if redis.call('SCARD', bkey(bid, ':dead')) > 0 then fire(bid, 'death') end
local parent, how = complete(bid)
batch_settled(parent, bid, how)
local reply = { 1 }
for _, f in ipairs(fired) do reply[#reply + 1] = f end
return reply
