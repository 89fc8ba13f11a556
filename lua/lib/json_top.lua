-- SPDX-License-Identifier: MIT
-- json_top(s, small): shared fragment (doc/protocol.md §6.36): the summary of the JSON
-- object text s: an object of its top-level members whose value text is at most small
-- bytes, each copied byte for byte (a "payload" object member, as a workers entry holds,
-- summarised the same way, one level down); nil when s is not an object whose top level
-- closes (values are skipped over, not checked).
-- json_fields(raw): what scripts that read a job's members use: pcall(cjson.decode, raw)
-- for a text of at most 1 MiB, and for a longer one the same of its summary (members of
-- more than 1024 bytes left out: args, a backtrace), so that a job of 40 MB costs the
-- server a walk of its text, not a decode.
--
-- Why not cjson.decode: it takes about 2 s of the server's time for a 40 MB job (it copies
-- a long string byte by byte), during which Redis answers nobody; this walks the text with
-- plain string.find, which skips a long string or a long array of numbers at memchr's
-- speed, and copies only what it keeps. And the members keep their exact text (cjson
-- rounds large integers, lesson 7).

-- A finder over s: at(c, j) is the index of the first plain byte c at or after j, or nil.
-- Each byte's next place is kept (with where the look started: a look from before that is
-- made again), so a walk forward scans the text once per byte looked for
-- (a class pattern of a quote and a backslash runs at about 30 MB/s; a plain find at
-- memchr's speed).
local function json_finder(s)
	local nxt, from = {}, {}
	return function(c, j)
		local n = nxt[c]
		if n == nil or from[c] > j or (n and n < j) then
			n = string.find(s, c, j, true) or false
			nxt[c], from[c] = n, j
		end
		return n or nil
	end
end

local JSON_BACKSLASH = string.char(92)

-- The index of the closing quote of the string opening at i, or nil.
local function json_string_end(at, i)
	local j = i + 1
	while true do
		local q = at('"', j)
		if not q then return nil end
		local b = at(JSON_BACKSLASH, j)
		if not b or b > q then return q end
		j = b + 2
	end
end

-- The first of the bytes cs at or after j: its index and the byte, or nil.
local function json_first(at, cs, j)
	local best, which = nil, nil
	for _, c in ipairs(cs) do
		local k = at(c, j)
		if k and (not best or k < best) then best, which = k, c end
	end
	return best, which
end

local JSON_NEST = { '"', '{', '}', '[', ']' }

-- The index of the last byte of the value starting at i, or nil.
local function json_value_end(s, at, i)
	local c = string.sub(s, i, i)
	if c == '"' then return json_string_end(at, i) end
	if c == '{' or c == '[' then
		local depth, j = 0, i
		while true do
			local k, d = json_first(at, JSON_NEST, j)
			if not k then return nil end
			if d == '"' then
				k = json_string_end(at, k)
				if not k then return nil end
			elseif d == '{' or d == '[' then
				depth = depth + 1
			else
				depth = depth - 1
				if depth == 0 then return k end
			end
			j = k + 1
		end
	end
	local k = string.find(s, '[,}%]%s]', i)
	return k and k - 1 or #s
end

-- The summary of the object opening at i (see above), as JSON text.
local function json_top_at(s, at, i, small, depth)
	local out, pos = {}, i + 1
	while true do
		local ks = string.find(s, '[^%s,]', pos)
		if not ks or string.sub(s, ks, ks) ~= '"' then break end
		local ke = json_string_end(at, ks)
		local colon = ke and string.find(s, '^%s*:%s*', ke + 1)
		if not colon then break end
		local vs = string.find(s, '[^%s:]', colon)
		local ve = vs and json_value_end(s, at, vs)
		if not ve then break end
		local key = string.sub(s, ks, ke)
		if ve - vs + 1 <= small then
			out[#out + 1] = key .. ':' .. string.sub(s, vs, ve)
		elseif depth == 0 and key == '"payload"' and string.sub(s, vs, vs) == '{' then
			local inner = json_top_at(s, at, vs, small, 1)
			if inner then out[#out + 1] = key .. ':' .. inner end
		end
		pos = ve + 1
	end
	local close = string.find(s, '[^%s,]', pos)
	if not close or string.sub(s, close, close) ~= '}' then return nil end
	return '{' .. table.concat(out, ',') .. '}'
end

local function json_top(s, small)
	local i = string.find(s, '[^%s]')
	if not i or string.sub(s, i, i) ~= '{' then return nil end
	return json_top_at(s, json_finder(s), i, small, 0)
end

local function json_fields(raw)
	if #raw <= 1048576 then return pcall(cjson.decode, raw) end
	local top = json_top(raw, 1024)
	if not top then return false, 'not a JSON object' end
	return pcall(cjson.decode, top)
end
