-- The Redis store's compare-and-set, sent byte for byte (EVALSHA names it by the SHA-1 of this file).
-- KEYS: record, counter, authority. ARGV: expected, version, delete (0/1), bytes, fresh fences,
-- not_before (ms, -1: none), forget_at (ms, -1: none), tokens at least the server's time (0/1:
-- 0 in the tests that expect tokens 1, 2, 3...), the bytes replaced (compared with the
-- version: a record damaged in place is a conflict), how long a lease of the new record holds
-- its place (ms; the authority keeps the longest as the recovery delay), the run_id of the
-- server the client's connection reached (INFO at connect; empty if unknown).
-- Replies the fences written (a string, empty for none), or on a conflict an array: the
-- server's time (seconds, microseconds) and the record's v, r, f; or the error
-- "RECOVERING <until ms> <now ms>" for a grant while this server recovers (nothing written).
-- Written for the server's time per call (measured with INFO commandstats): no table is made
-- and no helper called on the common paths, and the success reply is a string, not an array.
local t = redis.call('TIME')
local nb = ARGV[6]
local cur = redis.call('HMGET', KEYS[1], 'v', 'r')
if (cur[1] or '0') ~= ARGV[1] or (ARGV[1] ~= '0' and cur[2] ~= ARGV[9])
    or (nb ~= '-1' and t[1] * 1000 + (t[2] - t[2] % 1000) / 1000 < tonumber(nb)) then
  local rec = redis.call('HMGET', KEYS[1], 'v', 'r', 'f')
  return {t[1], t[2], rec[1], rec[2], rec[3]}
end
local n = tonumber(ARGV[5])
local holds = tonumber(ARGV[10])
if n > 0 or holds > 0 then
  -- The authority (docs/stores.md, "Recovery after a change of authority"): which server last
  -- granted here (its run_id), when that was checked, until when grants wait, and the longest
  -- a lease was written to hold (the recovery delay). The server looks its run_id up (INFO,
  -- ~6 us) when the client's connection reached another server than the authority, and at
  -- least every 100 ms of its time (a client behind a proxy that moved it to another server
  -- without a new connection passes a stale one).
  local a = redis.call('HMGET', KEYS[3], 'id', 'checked', 'until', 'longest')
  local longest = tonumber(a[4]) or 0
  if n > 0 then
    local ms = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
    local checked = tonumber(a[2])
    if not a[1] or a[1] ~= ARGV[11] or not checked or ms - checked >= 100 or ms < checked then
      local id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
      if a[1] and a[1] ~= id then
        -- This server took over (a promoted replica, a restart from an older file): a lease
        -- granted by the last one may have been lost with its record and still be held.
        a[3] = string.format('%d', ms + longest)
        redis.call('HSET', KEYS[3], 'until', a[3])
      end
      redis.call('HSET', KEYS[3], 'id', id, 'checked', string.format('%d', ms))
    end
    if a[3] and ms < tonumber(a[3]) then
      return redis.error_reply('RECOVERING ' .. a[3] .. ' ' .. string.format('%d', ms))
    end
  end
  if holds > longest then
    redis.call('HSET', KEYS[3], 'longest', ARGV[10])
  end
end
local fences = ''
if n > 0 then
  local first = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
  if ARGV[8] == '1' then
    -- Every token is also at least the server's time in microseconds: a server that lost the
    -- tail of the writes (a replica promoted before it had them, a restart from an older file,
    -- a new namespace) still never hands out a token issued before it (docs/stores.md).
    local now = t[1] * 1000000 + t[2]
    if now > first then
      first = now
    end
  end
  -- (n - 1) first: first + n could round away at 2^53 (Lua numbers are doubles).
  local last = first + (n - 1)
  if last > 9007199254740991 then
    return redis.error_reply('EXHAUSTED fencing tokens reached 2^53')
  end
  redis.call('SET', KEYS[2], string.format('%d', last))
  if n == 1 then
    fences = string.format('%d', last)
  else
    local parts = {}
    for i = n - 1, 0, -1 do
      parts[#parts + 1] = string.format('%d', last - i)
    end
    fences = table.concat(parts, ',')
  end
end
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'v', ARGV[2], 'r', ARGV[4], 'f', fences)
  if ARGV[7] ~= '-1' then
    redis.call('PEXPIREAT', KEYS[1], ARGV[7])
  else
    redis.call('PERSIST', KEYS[1])
  end
end
return fences
