-- SPDX-License-Identifier: MIT
-- QUARANTINE (doc/protocol.md §6.18): KeyGuard renames a damaged (wrong-typed) key out of the
-- way.
--
-- KEYS: [1] the damaged key  [2] the quarantine name
--       (cogworker:quarantine:<key>:<ms-epoch>:<8 hex>)
-- ARGV: [1] expected type ("list", "zset", "set", "hash", "string")  [2] 2592000
-- Returns 1 when the key was quarantined, 0 when it is absent or has the expected type.
--
-- Order: TYPE key (check) -> RENAME key quarantine -> EXPIRE quarantine ttl.
-- Why: the type is re-checked atomically, so a key fixed or recreated in between is
-- left alone.
local t = redis.call('TYPE', KEYS[1])
if type(t) == 'table' then t = t.ok end -- TYPE is a status reply
if t == 'none' or t == ARGV[1] then return 0 end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 1
