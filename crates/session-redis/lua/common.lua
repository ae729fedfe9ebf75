-- Shared by every script. KEYS[1..9] are one session's keys (one hash tag):
-- s, st, ev, ids, arc, ctx, inv, dl, init.
-- ARGV[1] now (microseconds), ARGV[2] 's' (standalone) or 'c' (cluster), ARGV[3] key prefix.
local S, ST, EV, IDS, ARC, CTX, INV, DL, INIT = 1, 2, 3, 4, 5, 6, 7, 8, 9
local NOW = tonumber(ARGV[1])
local STANDALONE = ARGV[2] == 's'
local PREFIX = ARGV[3]

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

local function user_key(app, user) return PREFIX .. ':u:{' .. app .. '/' .. user .. '}' end
local function app_key(app) return PREFIX .. ':a:{' .. app .. '}' end

-- Activity (and, unless `activity_only`, expiry) indexes; standalone only:
-- in cluster mode the client does it.
local function index(sid, activity_only)
  if not STANDALONE then return end
  local f = redis.call('HMGET', KEYS[S], 'app', 'user_id', 'key', 'updated_at', 'expires_at')
  local app, user, key = f[1], f[2], f[3]
  local score = -tonumber(f[4])
  redis.call('ZADD', PREFIX .. ':idx:all', score, sid)
  redis.call('ZADD', PREFIX .. ':idx:o:' .. app .. '/' .. user, score, sid)
  if key and key ~= '' then redis.call('ZADD', PREFIX .. ':idx:k:' .. app .. '/' .. key, score, sid) end
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
  return {
    context_tokens = tonumber(f[10]),
    last_seq = tonumber(f[1]), next_ctx_pos = tonumber(f[2]), event_count = tonumber(f[3]),
    version = tonumber(f[4]), updated_at = tonumber(f[5]), app = f[6], user = f[7], key = f[8],
    expires_at = f[9],
  }
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
  redis.call('ZADD', PREFIX .. ':idx:o:' .. h.app .. '/' .. h.user, score, sid)
  if h.key and h.key ~= '' then redis.call('ZADD', PREFIX .. ':idx:k:' .. h.app .. '/' .. h.key, score, sid) end
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
