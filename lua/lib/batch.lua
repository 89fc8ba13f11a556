-- SPDX-License-Identifier: MIT
-- batch: shared fragment of the batch and dependency scripts (doc/protocol.md §6.23,
-- §7.34). It reads the eight arguments every one of them takes first:
--   ARGV[1] "cogworker:batch:" (K)   [2] "cogworker:queue:"   [3] "cogworker:queues"
--   ARGV[4] "cogworker:dead"   [5] "cogworker:schedule"   [6] now (epoch seconds, text)
--   ARGV[7] seconds a finished batch's keys are kept   [8] seconds a job's settled record
--   is kept
-- so a script's own arguments start at ARGV[9]. Keys are computed from K (§2): a batch is
-- K..bid (hash) with the sets K..bid..':pending', ':succeeded', ':dead', ':discarded'; a
-- job that waits is K..'wait:'..jid (hash) with K..'after:'..jid (what it still waits
-- for), named in K..'dependants:'..dep of each; K..'waiting' lists them; K..'settled:'..
-- jid says how a job settled for good; K..'owed' (hash jid -> '<outcome> <bid>') holds the
-- settles not finished yet. Keys are computed because a settle walks up to parents and on
-- to dependants it learns as it goes.
--
-- The rules kept here (and nowhere else):
-- - Membership is a set of ids, never a counter: a member settles by SREM from pending,
--   so a job run twice, retried, recovered or settled twice counts once.
-- - A callback is pushed by fire(), which writes its mark in the same call: HEXISTS of the
--   mark first, so it is pushed at most once; the jid is derived from the bid and the kind,
--   so even a copy (a replayed AOF) is the same job.
-- - A batch completes only when committed with nothing pending; its parent then settles
--   it as a member (success when no member died or was discarded, else dead), up the tree.
--   A batch cancelled settles in its parent as discarded, one expired as dead (their
--   scripts call batch_settled).
-- - Nothing fires before the commit (on_death of a member that died before it fires at
--   the commit), nor in a batch cancelled or under one (fire() looks up the tree).
-- - A set made by a member settling in a batch finished without completing (cancelled,
--   expired) gets the TTL of finished batches' keys, so it leaves no key for ever.
-- - A dead member that later succeeds (retried by hand, by cogworkerctl or the Web UI)
--   moves from dead to succeeded, so on_success fires after all.
-- - A job's settled record never contradicts what its batch counted: the first settle for
--   good wins, and a later one settles as that one did (a re-run after a kill -9 between
--   the settle and the ack may die where the first run succeeded); only a success after a
--   death replaces it, as the batch moves that member from dead to succeeded.
-- - One call handles at most RELEASE_CHUNK jobs that wait (a burial counting BURY_COST),
--   so a job with 100 000 dependants never holds Redis for long (doc/performance.md). A
--   settle stopped there is noted in K..'owed' in the same call and goes on at its next
--   call (the caller's loop, or the poller's look at K..'owed'); a burial script notes
--   the settle it leaves to its caller there too, so a crash in between loses nothing.
--   Each dependant is taken out of the set in the call that handles it: never twice,
--   never early (a release still needs its after set empty).
if redis.replicate_commands then pcall(redis.replicate_commands) end -- SRANDMEMBER below
local K, QP, QUEUES, DEAD, SCHED = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local NOW, KEEP, SETTLED_TTL = ARGV[6], ARGV[7], ARGV[8]
local fired = {}        -- 'bid kind jid' of each callback this call pushed
local RELEASE_CHUNK = 250      -- a release's share of one call; a burial counts BURY_COST
local BURY_COST = 4             -- (a dead entry written, and its own settle: 4 times dearer)
local budget = RELEASE_CHUNK    -- dependants this call may still release or bury

-- A dependency's settled record while jobs wait for it and it has not settled: set by
-- BATCH_PUSH, so that a plain job's success, whose ack writes its record with SET ... GET,
-- learns from the reply that jobs wait for it (SETTLED_WAITED in src/workflow.h). It
-- reads as no record (settled_as).
local WAITED = 'waited'
local OUTCOME_SET = { success = ':succeeded', dead = ':dead', discarded = ':discarded' }
local PARTS = { '', ':pending', ':succeeded', ':dead', ':discarded' }

local function bkey(bid, part) return K .. bid .. (part or '') end

-- How job jid settled for good (its record), or nil when it has not (or jobs wait for it).
local function settled_as(jid)
	local s = redis.call('GET', K .. 'settled:' .. jid)
	if s == WAITED then return nil end
	return s or nil
end

local function keep_for(bid, ttl)
	for _, p in ipairs(PARTS) do
		if ttl then redis.call('EXPIRE', bkey(bid, p), ttl)
		else redis.call('PERSIST', bkey(bid, p)) end
	end
end

local queues_seen = {}  -- queues this call SADDed already: once is enough

local function push_job(raw, queue, at)
	if at and at ~= '' then
		redis.call('ZADD', SCHED, at, raw)
		return 'scheduled'
	end
	redis.call('LPUSH', QP .. queue, raw)
	if not queues_seen[queue] then
		pcall(redis.call, 'SADD', QUEUES, queue)
		queues_seen[queue] = true
	end
	return 'queued'
end

-- true when a batch above bid is cancelled: the walk of BATCH_CANCEL reaches its child
-- batches one call after another, and none of them may fire meanwhile.
local function under_cancel(bid)
	local p = redis.call('HGET', bkey(bid), 'parent')
	while p and p ~= '' do
		if redis.call('HGET', bkey(p), 'state') == 'cancelled' then return true end
		p = redis.call('HGET', bkey(p), 'parent')
	end
	return false
end

-- Push the batch's callback of this kind once; the mark is its jid ('' when none named).
local function fire(bid, kind)
	local h = bkey(bid)
	if redis.call('HEXISTS', h, 'fired_' .. kind) == 1 or under_cancel(bid) then return end
	local cls = redis.call('HGET', h, 'on_' .. kind)
	local jid = ''
	if cls and cls ~= '' then
		jid = string.sub(redis.sha1hex(bid .. ':' .. kind), 1, 24)
		local queue = redis.call('HGET', h, 'callback_queue') or 'default'
		local args = redis.call('HGET', h, 'callback_args') or '[]'
		push_job('{"class":' .. cjson.encode(cls) .. ',"args":' .. args .. ',"queue":' ..
		         cjson.encode(queue) .. ',"jid":"' .. jid .. '","bid":"' .. bid ..
		         '","callback":"' .. kind .. '","created_at":' .. NOW ..
		         ',"enqueued_at":' .. NOW .. '}', queue)
		fired[#fired + 1] = bid .. ' ' .. kind .. ' ' .. jid
	end
	redis.call('HSET', h, 'fired_' .. kind, jid)
end

-- nil when bid takes a new member from adder ('' = not a member), else why not.
local function may_add(bid, adder)
	local state = redis.call('HGET', bkey(bid), 'state')
	if not state then return 'batch ' .. bid .. ' does not exist' end
	if state == 'open' then return nil end
	if state == 'committed' and adder ~= '' and
			redis.call('SISMEMBER', bkey(bid, ':pending'), adder) == 1 then
		return nil
	end
	if state == 'committed' then
		return 'batch ' .. bid .. ' is committed: only its members still running may add to it'
	end
	return 'batch ' .. bid .. ' is ' .. state
end

-- A committed batch with nothing pending fires on_complete and, with no member dead or
-- discarded, on_success; returns its parent and how it settles there.
local function complete(bid)
	local h = bkey(bid)
	if redis.call('HGET', h, 'state') ~= 'committed' then return nil end
	if redis.call('SCARD', bkey(bid, ':pending')) > 0 then return nil end
	fire(bid, 'complete')
	local failed = redis.call('SCARD', bkey(bid, ':dead')) +
	               redis.call('SCARD', bkey(bid, ':discarded'))
	if failed == 0 then fire(bid, 'success') end
	if redis.call('HEXISTS', h, 'completed_at') == 0 then
		redis.call('HSET', h, 'completed_at', NOW)
	end
	keep_for(bid, KEEP)
	local parent = redis.call('HGET', h, 'parent')
	if parent and parent ~= '' then return parent, failed == 0 and 'success' or 'dead' end
	return nil
end

-- true when the member's settling changed its batch.
local function member_settle(bid, member, outcome)
	local state = redis.call('HGET', bkey(bid), 'state')
	if not state then return false end
	local changed = false
	if redis.call('SREM', bkey(bid, ':pending'), member) == 1 then
		redis.call('SADD', bkey(bid, OUTCOME_SET[outcome]), member)
		if outcome == 'dead' and state == 'committed' then fire(bid, 'death') end
		changed = true
	else
		changed = outcome == 'success' and
		          redis.call('SMOVE', bkey(bid, ':dead'), bkey(bid, ':succeeded'), member) == 1
	end
	local set = bkey(bid, OUTCOME_SET[outcome])
	if changed and state ~= 'open' and state ~= 'committed' and
	   redis.call('TTL', set) == -1 then
		redis.call('EXPIRE', set, KEEP)
	end
	return changed
end

-- A member settled for good in bid ('' = none), and what that completes, up the tree.
local function batch_settled(bid, member, outcome)
	while bid and bid ~= '' and member_settle(bid, member, outcome) do
		local parent, how = complete(bid)
		bid, member, outcome = parent, bid, how
	end
end

-- A job that waited leaves: its records go, and its name from each dependency's set.
local function waiter_gone(w)
	for _, dep in ipairs(redis.call('SMEMBERS', K .. 'after:' .. w)) do
		redis.call('SREM', K .. 'dependants:' .. dep, w)
	end
	redis.call('DEL', K .. 'wait:' .. w, K .. 'after:' .. w)
	redis.call('ZREM', K .. 'waiting', w)
end

-- Job jid settled for good as outcome, a member of bid ('' = none): its settled record,
-- its batch, then each job waiting for it: released once it waits for nothing more,
-- buried as Cogworker::DependencyFailed when jid failed (unless it waits with any), and
-- a burial settles in turn. Up to this call's share of dependants: a job with more left
-- is noted in K..'owed'. Returns the counts released and buried, and 1 when jid has
-- dependants left (its next call goes on), else 0.
local function job_settled(jid, outcome, bid)
	local work, i, released, buried, left = { { jid, outcome, bid } }, 1, 0, 0, 0
	while work[i] do    -- grows by burials only, each out of the share: bounded
		local j, o, b = work[i][1], work[i][2], work[i][3]
		i = i + 1
		local prev = settled_as(j)
		if prev and prev ~= o and not (prev == 'dead' and o == 'success') then o = prev end
		redis.call('SET', K .. 'settled:' .. j, o, 'EX', SETTLED_TTL)
		batch_settled(b, j, o)
		local dk = K .. 'dependants:' .. j
		local chunk = budget > 0 and redis.call('SRANDMEMBER', dk, budget) or {}
		for _, w in ipairs(chunk) do
			if budget <= 0 then break end
			budget = budget - 1
			local wait = redis.call('HMGET', K .. 'wait:' .. w, 'payload', 'queue', 'any', 'at', 'bid')
			if wait[1] and o ~= 'success' and wait[3] ~= '1' then
				budget = budget - BURY_COST + 1
				local why = 'dependency ' .. j .. (o == 'dead' and ' died' or ' was discarded')
				redis.call('ZADD', DEAD, NOW, string.sub(wait[1], 1, -2) ..
				           ',"error_class":"Cogworker::DependencyFailed","error_message":' ..
				           cjson.encode(why) .. ',"failed_at":' .. NOW .. '}')
				waiter_gone(w)
				buried = buried + 1
				work[#work + 1] = { w, 'dead', wait[5] or '' }
			elseif wait[1] then
				redis.call('SREM', K .. 'after:' .. w, j)
				if redis.call('EXISTS', K .. 'after:' .. w) == 0 then   -- waits for nothing
					push_job(wait[1], wait[2], wait[4])
					redis.call('DEL', K .. 'wait:' .. w)
					redis.call('ZREM', K .. 'waiting', w)
					released = released + 1
				end
			end
			redis.call('SREM', dk, w)
		end
		if redis.call('EXISTS', dk) == 1 then
			redis.call('HSET', K .. 'owed', j, o .. ' ' .. (b or ''))
			if j == jid then left = 1 end
		else
			redis.call('HDEL', K .. 'owed', j)
		end
	end
	return released, buried, left
end
