-- Shared by every write script but the append's (`append.lua` stands
-- alone and reads a fixed layout of its own). The client decides every
-- write (seqs, versions, counters, merged state); the scripts read ARGV in
-- order and write what it planned, atomically, after checking the head is
-- still the one the plan was made from.
--
-- KEYS are one session's keys (one hash tag), in the order of keys.rs. The
-- names are historical: the archive set is named `sid`, the context set
-- `arc`, the invocation hash `ctx`, the delta hash `tok`, the initial state
-- `inv`. The last two are the search index's: its watermark hash (`dl`)
-- and the set of its trigram keys (`init`), written by `index.lua`; then
-- the list of the context's changes (`chg`).
local S, ST, EV, IDS, ARC, CTX, INV, DL, INIT, SX, SXT, CHG = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12

-- Removes the search index's trigram keys (the set names them; the
-- watermark and the set go with the session's other keys).
local function drop_search()
  local keys = redis.call('SMEMBERS', KEYS[SXT])
  for i = 1, #keys, 1000 do
    redis.call('DEL', unpack(keys, i, math.min(i + 999, #keys)))
  end
end

local at = 1
-- The next argument.
local function arg()
  local v = ARGV[at]
  at = at + 1
  return v
end
local function count() return tonumber(arg()) end

-- The header of every write: the client's clock (microseconds), then the
-- fingerprint (head fields the client read, as name/value pairs; '' for a
-- field or session that was absent). True when the head still holds every
-- one and, if `need_live`, the session exists and has not expired.
local function begin(need_live)
  local now = count()
  local n = count()
  local names, wants = {}, {}
  for i = 1, n do
    names[i] = arg()
    wants[i] = arg()
  end
  names[n + 1] = 'expires_at'
  local got = redis.call('HMGET', KEYS[S], unpack(names))
  for i = 1, n do
    if (got[i] or '') ~= wants[i] then return false end
  end
  if not need_live then return true end
  local exp = got[n + 1]
  return exp ~= false and (exp == '' or tonumber(exp) > now)
end

-- An owner's index and shared-state keys ('' in cluster mode, where the
-- client writes them).
local function owner()
  return { all = arg(), own = arg(), key = arg(), exp = arg(), user = arg(), app = arg() }
end

-- Applies a count of key/value pairs to a hash ('' value deletes the key;
-- '' hash name: the pairs are skipped).
local function apply_kv(hash)
  for _ = 1, count() do
    local k, v = arg(), arg()
    if hash ~= '' then
      if v == '' then redis.call('HDEL', hash, k) else redis.call('HSET', hash, k, v) end
    end
  end
end

-- Sets a count of name/value pairs on the session's head.
local function set_head()
  local fields = {}
  for _ = 1, count() do
    fields[#fields + 1] = arg()
    fields[#fields + 1] = arg()
  end
  if #fields > 0 then redis.call('HSET', KEYS[S], unpack(fields)) end
end

-- Lowers the head's count of stored event bytes by `bytes` (events that
-- left the archive), never below zero.
local function drop_bytes(bytes)
  local held = tonumber(redis.call('HGET', KEYS[S], 'event_bytes') or '0') or 0
  local left = held - bytes
  if left < 0 then left = 0 end
  redis.call('HSET', KEYS[S], 'event_bytes', string.format('%.0f', left))
end

-- Stores a count of events, each as seq, id, body, invocation ('' none)
-- and session-scope delta JSON ('' none).
local function write_events()
  for _ = 1, count() do
    local seq, id, body, inv, delta = arg(), arg(), arg(), arg(), arg()
    redis.call('HSET', KEYS[EV], seq, body)
    redis.call('HSET', KEYS[IDS], id, seq)
    redis.call('ZADD', KEYS[ARC], seq, seq)
    if inv ~= '' then redis.call('HSETNX', KEYS[INV], inv, seq) end
    if delta ~= '' then redis.call('HSET', KEYS[DL], seq, delta) end
  end
end

-- Context entries: '1' to replace the whole context, then a count of
-- (position, seq) pairs.
local function write_context()
  if arg() == '1' then redis.call('DEL', KEYS[CTX]) end
  for _ = 1, count() do
    local pos, seq = arg(), arg()
    redis.call('ZADD', KEYS[CTX], pos, seq)
  end
end

-- A count of context changes (JSON), added to the end of the context's history.
local function write_changes()
  for _ = 1, count() do
    redis.call('RPUSH', KEYS[CHG], arg())
  end
end

-- The activity score ('-' leaves the activity indexes), then the expiry
-- score ('' removes the entry, '-' leaves it), written to the owner's indexes.
local function index(o, sid)
  local activity, expiry = arg(), arg()
  if o.all == '' then return end
  if activity ~= '-' then
    redis.call('ZADD', o.all, activity, sid)
    redis.call('ZADD', o.own, activity, sid)
    if o.key ~= '' then redis.call('ZADD', o.key, activity, sid) end
  end
  if expiry == '' then redis.call('ZREM', o.exp, sid)
  elseif expiry ~= '-' then redis.call('ZADD', o.exp, expiry, sid) end
end

-- Removes the session from an owner's indexes.
local function unindex(o, sid)
  if o.all == '' then return end
  redis.call('ZREM', o.all, sid)
  redis.call('ZREM', o.own, sid)
  if o.key ~= '' then redis.call('ZREM', o.key, sid) end
  redis.call('ZREM', o.exp, sid)
end

-- The TTL change (see `ttl.lua`).
local function touch() refresh_ttl(arg()) end

-- The token estimate of a stored event (read from its JSON; 0 when unreadable).
local function tokens_of(seq)
  local body = redis.call('HGET', KEYS[EV], seq)
  if not body then return 0 end
  local ok, e = pcall(cjson.decode, body)
  if ok and type(e) == 'table' and tonumber(e.token_estimate) then return tonumber(e.token_estimate) end
  return 0
end
