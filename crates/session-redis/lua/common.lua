-- Shared by every script. KEYS[1..9] are one session's keys (one hash tag):
-- s, st, ev, ids, arc, ctx, inv, dl, init.
-- ARGV[1] now (microseconds), ARGV[2] 's' (standalone) or 'c' (cluster), ARGV[3] key prefix.
local S, ST, EV, IDS, ARC, CTX, INV, DL, INIT = 1, 2, 3, 4, 5, 6, 7, 8, 9
local NOW = tonumber(ARGV[1])
local STANDALONE = ARGV[2] == 's'
local PREFIX = ARGV[3]
-- The highest seq and version (session_core::MAX_SEQ, MAX_VERSION): 2^53 - 1, exact as a Lua number.
local MAX_COUNTER = 9007199254740991

-- nil when the session is live; else the error to return.
local function check(write)
  if redis.call('EXISTS', KEYS[S]) == 0 then return redis.error_reply('NOTFOUND no such session') end
  local exp = redis.call('HGET', KEYS[S], 'expires_at')
  if exp and exp ~= '' and tonumber(exp) <= NOW then
    if write then return redis.error_reply('EXPIRED the session has expired') end
    return redis.error_reply('NOTFOUND no such session')
  end
  return nil
end

-- Keeps every key of the session on the session's TTL. Appends call it with
-- `often` false: only every 64th version refreshes (keys created in between
-- get their TTL then; purge_expired removes anything left).
local function touch(often, version)
  if often == false and version % 64 ~= 1 then return end
  local at = redis.call('HGET', KEYS[S], 'ttl_at')
  if at and at ~= '' then
    for i = 1, #KEYS do redis.call('PEXPIREAT', KEYS[i], at) end
  end
end

-- Applies n key/value pairs from ARGV starting at i to a hash ('' value deletes).
local function apply_kv(key, i)
  local n = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n do
    local k, v = ARGV[i], ARGV[i + 1]; i = i + 2
    if v == '' then redis.call('HDEL', key, k) else redis.call('HSET', key, k, v) end
  end
  return i
end

local function skip_kv(i) return i + 1 + 2 * tonumber(ARGV[i]) end

local function owner()
  local f = redis.call('HMGET', KEYS[S], 'app', 'user_id', 'key')
  return f[1], f[2], f[3]
end

-- "app/user" with '/' inside either part escaped as %2F (names may hold '/';
-- '%' never occurs in one), so two owners never share a key.
local function pair(a, b) return (string.gsub(a, '/', '%%2F')) .. '/' .. (string.gsub(b, '/', '%%2F')) end
local function user_key(app, user) return PREFIX .. ':u:{' .. pair(app, user) .. '}' end
local function app_key(app) return PREFIX .. ':a:{' .. app .. '}' end

-- Activity (and, unless `activity_only`, expiry) indexes; standalone only:
-- in cluster mode the client does it.
local function index(sid, activity_only)
  if not STANDALONE then return end
  local f = redis.call('HMGET', KEYS[S], 'app', 'user_id', 'key', 'updated_at', 'expires_at')
  local app, user, key = f[1], f[2], f[3]
  local score = -tonumber(f[4])
  redis.call('ZADD', PREFIX .. ':idx:all', score, sid)
  redis.call('ZADD', PREFIX .. ':idx:o:' .. pair(app, user), score, sid)
  if key and key ~= '' then redis.call('ZADD', PREFIX .. ':idx:k:' .. pair(app, key), score, sid) end
  if activity_only then return end
  if f[5] and f[5] ~= '' then redis.call('ZADD', PREFIX .. ':idx:exp', tonumber(f[5]), sid)
  else redis.call('ZREM', PREFIX .. ':idx:exp', sid) end
end

local function bump(written)
  local updated = tonumber(redis.call('HGET', KEYS[S], 'updated_at'))
  if NOW > updated then redis.call('HSET', KEYS[S], 'updated_at', ARGV[1]) end
  return redis.call('HINCRBY', KEYS[S], 'version', 1)
end

-- The session's head, read once per write: counters are updated in Lua
-- locals and written back with one HSET by `save_head`.
local function load_head()
  local f = redis.call('HMGET', KEYS[S], 'last_seq', 'next_ctx_pos', 'event_count', 'version',
    'updated_at', 'app', 'user_id', 'key', 'expires_at', 'context_tokens')
  if not f[1] then return nil, redis.error_reply('NOTFOUND no such session') end
  if f[9] and f[9] ~= '' and tonumber(f[9]) <= NOW then
    return nil, redis.error_reply('EXPIRED the session has expired')
  end
  local h = {
    context_tokens = tonumber(f[10]),
    last_seq = tonumber(f[1]), next_ctx_pos = tonumber(f[2]), event_count = tonumber(f[3]),
    version = tonumber(f[4]), updated_at = tonumber(f[5]), app = f[6], user = f[7], key = f[8],
    expires_at = f[9],
  }
  if not (h.last_seq and h.version and h.next_ctx_pos and h.event_count and h.updated_at
      and h.context_tokens and h.app and h.user)
      or h.last_seq < 0 or h.last_seq > MAX_COUNTER or h.version < 0 or h.version > MAX_COUNTER then
    return nil, redis.error_reply('CORRUPT the session head holds an unreadable counter')
  end
  return h
end

-- How many of the n insert() records from ARGV[i] name ids the session does not hold.
local function count_new(i, n)
  local fresh = 0
  for _ = 1, n do
    if not redis.call('HGET', KEYS[IDS], ARGV[i]) then fresh = fresh + 1 end
    i = skip_kv(skip_kv(skip_kv(i + 5)))
  end
  return fresh
end

-- nil when the n insert() records from ARGV[i] fit under the seq and version
-- maximums; else the error. Checked before anything is written (a script
-- that fails half way keeps its writes).
local function check_room(h, i, n)
  if h.last_seq + n <= MAX_COUNTER and h.version < MAX_COUNTER then return nil end
  local fresh = count_new(i, n)
  if fresh == 0 then return nil end
  if h.last_seq + fresh > MAX_COUNTER then
    return redis.error_reply('LIMIT the session has used every seq up to the maximum')
  end
  if h.version >= MAX_COUNTER then
    return redis.error_reply('LIMIT the session has reached the maximum version')
  end
  return nil
end

-- nil when the version can still be bumped; else the error.
local function check_version()
  local v = tonumber(redis.call('HGET', KEYS[S], 'version'))
  if not v or v < 0 or v > MAX_COUNTER then
    return redis.error_reply('CORRUPT the session head holds an unreadable counter')
  end
  if v >= MAX_COUNTER then
    return redis.error_reply('LIMIT the session has reached the maximum version')
  end
  return nil
end

local function save_head(h, extra)
  if NOW > h.updated_at then h.updated_at = NOW end
  h.version = h.version + 1
  redis.call('HSET', KEYS[S], 'last_seq', h.last_seq, 'next_ctx_pos', h.next_ctx_pos,
    'event_count', h.event_count, 'version', h.version, 'updated_at', string.format('%.0f', h.updated_at),
    unpack(extra or {}))
end

-- Activity index entries from a loaded head (standalone only).
local function index_head(h, sid)
  if not STANDALONE then return end
  local score = -h.updated_at
  redis.call('ZADD', PREFIX .. ':idx:all', score, sid)
  redis.call('ZADD', PREFIX .. ':idx:o:' .. pair(h.app, h.user), score, sid)
  if h.key and h.key ~= '' then redis.call('ZADD', PREFIX .. ':idx:k:' .. pair(h.app, h.key), score, sid) end
end

-- Inserts one new event (ARGV from i: id, body, tokens, invocation, session
-- delta json, then session, user and app key/value lists) at the head's next
-- seq; returns its seq and the next index, or the existing seq when the id is known.
local function insert(h, i, in_context)
  local id, body, inv, sdelta = ARGV[i], ARGV[i + 1], ARGV[i + 3], ARGV[i + 4]
  i = i + 5
  local known = redis.call('HGET', KEYS[IDS], id)
  if known then
    i = skip_kv(i); i = skip_kv(i); i = skip_kv(i)
    return tonumber(known), i, false
  end
  h.last_seq = h.last_seq + 1
  local seq = h.last_seq
  redis.call('HSET', KEYS[EV], seq, body)
  redis.call('HSET', KEYS[IDS], id, seq)
  redis.call('ZADD', KEYS[ARC], seq, seq)
  if in_context then
    redis.call('ZADD', KEYS[CTX], h.next_ctx_pos, seq)
    h.next_ctx_pos = h.next_ctx_pos + 1
  end
  if inv ~= '' then redis.call('HSETNX', KEYS[INV], inv, seq) end
  if sdelta ~= '' then redis.call('HSET', KEYS[DL], seq, sdelta) end
  h.event_count = h.event_count + 1
  i = apply_kv(KEYS[ST], i)
  if STANDALONE and (ARGV[i] ~= '0' or ARGV[skip_kv(i)] ~= '0') then
    i = apply_kv(user_key(h.app, h.user), i)
    i = apply_kv(app_key(h.app), i)
  else
    i = skip_kv(i); i = skip_kv(i)
  end
  return seq, i, true
end

-- The token estimate of a stored event (read from its JSON: rare paths only).
local function tokens_of(seq)
  local body = redis.call('HGET', KEYS[EV], seq)
  if not body then return 0 end
  local ok, e = pcall(cjson.decode, body)
  if ok and type(e) == 'table' and e.token_estimate then return tonumber(e.token_estimate) end
  return 0
end

local function context_tokens()
  local total = 0
  for _, seq in ipairs(redis.call('ZRANGE', KEYS[CTX], 0, -1)) do total = total + tokens_of(seq) end
  return total
end

-- Drops the session's keys and its owner's index entries (standalone: the
-- client does it in cluster mode).
local function drop(sid)
  if STANDALONE then
    local app, user, key = owner()
    redis.call('ZREM', PREFIX .. ':idx:all', sid)
    redis.call('ZREM', PREFIX .. ':idx:o:' .. pair(app, user), sid)
    if key and key ~= '' then redis.call('ZREM', PREFIX .. ':idx:k:' .. pair(app, key), sid) end
    redis.call('ZREM', PREFIX .. ':idx:exp', sid)
  end
  redis.call('DEL', unpack(KEYS))
end

-- Writes a session's head from ARGV[i..]: field/value pair count then pairs;
-- then state, user and app kv lists; then the initial state kv list.
local function write_session(i)
  local n = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, n do
    redis.call('HSET', KEYS[S], ARGV[i], ARGV[i + 1]); i = i + 2
  end
  i = apply_kv(KEYS[ST], i)
  if STANDALONE then
    local app, user = owner()
    i = apply_kv(user_key(app, user), i)
    i = apply_kv(app_key(app), i)
  else
    i = skip_kv(i); i = skip_kv(i)
  end
  return apply_kv(KEYS[INIT], i)
end

-- Writes stored events from ARGV[i..]: a count, then per event: seq, id,
-- body, tokens, invocation, session delta json, context position ('' = not
-- in the context).
local function write_events(i)
  local n = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, n do
    local seq, id, body, inv, sdelta, pos = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
    i = i + 7
    redis.call('HSET', KEYS[EV], seq, body)
    redis.call('HSET', KEYS[IDS], id, seq)
    redis.call('ZADD', KEYS[ARC], seq, seq)
    if pos ~= '' then redis.call('ZADD', KEYS[CTX], pos, seq) end
    if inv ~= '' then
      local known = redis.call('HGET', KEYS[INV], inv)
      if (not known) or tonumber(known) > tonumber(seq) then redis.call('HSET', KEYS[INV], inv, seq) end
    end
    if sdelta ~= '' then redis.call('HSET', KEYS[DL], seq, sdelta) end
  end
  return i
end
