-- Persists an append or a context replace as planned. Returns 1, -1 when
-- the head moved, or -2 when the session already holds one of the new
-- events' ids.
--
-- The hottest script, so it goes without `common.lua` (its helpers'
-- definitions alone cost more than a command; only `ttl.lua` is in
-- front) and reads a fixed layout, indexing ARGV directly:
--
--   1  the client's clock (microseconds)
--   2-4  version, created_at and updated_at as read: the head must still hold them
--   5-11 the head's new last_seq, next_ctx_pos, event_count, version,
--        updated_at, context_tokens and event_bytes
--   12 the activity score ('-' leaves the activity indexes)
--   13 the expiry score ('' removes the entry, '-' leaves it)
--   14 the TTL change ('0' none, '1' refresh, '2' refresh or persist)
--   15 '1' to replace the whole context
--   then a count of events, each as seq, id, body, invocation ('' none)
--     and session-scope delta ('' none);
--   a count of context entries, each as position and seq;
--   a count of context changes (JSON);
--   a count of session-state pairs (key, JSON value; '' deletes);
--   and last '' when the script writes nothing of the owner's, or the
--   session id, the owner's six keys (all, own, key or '', expiry, user
--   state, app state; see keys.rs) and a count of user-state pairs and
--   one of app-state pairs.
--
-- KEYS are the session's, in the order of keys.rs (see common.lua).
local S, ST, EV, IDS, ARC, CTX, INV, DL, CHG = 1, 2, 3, 4, 5, 6, 7, 8, 12
local A = ARGV

local got = redis.call('HMGET', KEYS[S], 'version', 'created_at', 'updated_at', 'expires_at')
if (got[1] or '') ~= A[2] or (got[2] or '') ~= A[3] or (got[3] or '') ~= A[4] then return -1 end
local exp = got[4]
if exp == false or (exp ~= '' and tonumber(exp) <= tonumber(A[1])) then return -1 end

-- The new events' ids first: a plan made from a remembered head did not
-- read the held ids, and nothing may be written when one is held.
local n = tonumber(A[16])
for k = 0, n - 1 do
  local i = 17 + k * 5
  if redis.call('HSETNX', KEYS[IDS], A[i + 1], A[i]) == 0 then
    for j = 0, k - 1 do redis.call('HDEL', KEYS[IDS], A[17 + j * 5 + 1]) end
    return -2
  end
end
local i = 17
for _ = 1, n do
  local seq, inv, delta = A[i], A[i + 3], A[i + 4]
  redis.call('HSET', KEYS[EV], seq, A[i + 2])
  redis.call('ZADD', KEYS[ARC], seq, seq)
  if inv ~= '' then redis.call('HSETNX', KEYS[INV], inv, seq) end
  if delta ~= '' then redis.call('HSET', KEYS[DL], seq, delta) end
  i = i + 5
end

if A[15] == '1' then redis.call('DEL', KEYS[CTX]) end
-- The context entries, up to 1,000 to a ZADD (unpack's limit is some 8,000 values).
local m = tonumber(A[i])
for first = 0, m - 1, 1000 do
  local entries = {}
  for k = 1, 2 * math.min(1000, m - first) do entries[k] = A[i + 2 * first + k] end
  redis.call('ZADD', KEYS[CTX], unpack(entries))
end
i = i + 1 + 2 * m

for k = 1, tonumber(A[i]) do redis.call('RPUSH', KEYS[CHG], A[i + k]) end
i = i + 1 + tonumber(A[i])

-- Applies the count of key/value pairs at ARGV[i] to `hash` ('' value
-- deletes the key); the index after them.
local function apply_kv(hash, at)
  local pairs_at = tonumber(A[at])
  for k = 0, pairs_at - 1 do
    local key, value = A[at + 1 + 2 * k], A[at + 2 + 2 * k]
    if value == '' then redis.call('HDEL', hash, key) else redis.call('HSET', hash, key, value) end
  end
  return at + 1 + 2 * pairs_at
end
i = apply_kv(KEYS[ST], i)

redis.call('HSET', KEYS[S], 'last_seq', A[5], 'next_ctx_pos', A[6], 'event_count', A[7],
  'version', A[8], 'updated_at', A[9], 'context_tokens', A[10], 'event_bytes', A[11])

if A[i] ~= '' then
  local sid, all, own, key, expiry_index = A[i], A[i + 1], A[i + 2], A[i + 3], A[i + 4]
  i = apply_kv(A[i + 6], apply_kv(A[i + 5], i + 7))
  local activity, expiry = A[12], A[13]
  if activity ~= '-' then
    redis.call('ZADD', all, activity, sid)
    redis.call('ZADD', own, activity, sid)
    if key ~= '' then redis.call('ZADD', key, activity, sid) end
  end
  if expiry == '' then redis.call('ZREM', expiry_index, sid)
  elseif expiry ~= '-' then redis.call('ZADD', expiry_index, expiry, sid) end
end

refresh_ttl(A[14])
return 1
