-- Shared by every script. KEYS[1..11] are one session's keys (one hash tag):
-- s, st, ev, ids, sid, arc, ctx, tok, inv, dl, init.
-- ARGV[1] now (microseconds), ARGV[2] 's' (standalone) or 'c' (cluster), ARGV[3] key prefix.
local S, ST, EV, IDS, SID, ARC, CTX, TOK, INV, DL, INIT = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
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

-- Keeps every key of the session on the session's TTL.
local function touch()
  local at = redis.call('HGET', KEYS[S], 'ttl_at')
  if at and at ~= '' then
    for i = 1, 11 do redis.call('PEXPIREAT', KEYS[i], at) end
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

-- Activity and expiry indexes (standalone: inside the script; cluster: the client does it).
local function index(sid)
  if not STANDALONE then return end
  local app, user, key = owner()
  local f = redis.call('HMGET', KEYS[S], 'updated_at', 'expires_at')
  local score = -tonumber(f[1])
  redis.call('ZADD', PREFIX .. ':idx:all', score, sid)
  redis.call('ZADD', PREFIX .. ':idx:o:' .. app .. '/' .. user, score, sid)
  if key and key ~= '' then redis.call('ZADD', PREFIX .. ':idx:k:' .. app .. '/' .. key, score, sid) end
  if f[2] and f[2] ~= '' then redis.call('ZADD', PREFIX .. ':idx:exp', tonumber(f[2]), sid)
  else redis.call('ZREM', PREFIX .. ':idx:exp', sid) end
end

local function bump(written)
  local updated = tonumber(redis.call('HGET', KEYS[S], 'updated_at'))
  if NOW > updated then redis.call('HSET', KEYS[S], 'updated_at', ARGV[1]) end
  return redis.call('HINCRBY', KEYS[S], 'version', 1)
end

-- Inserts one new event (ARGV from i: id, body, tokens, invocation, session delta json,
-- then session, user and app key/value lists); returns its seq and the next index,
-- or the existing seq when the id is known.
local function insert(i, ctx_pos)
  local id, body, tokens, inv, sdelta = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  i = i + 5
  local known = redis.call('HGET', KEYS[IDS], id)
  if known then
    i = skip_kv(i); i = skip_kv(i); i = skip_kv(i)
    return tonumber(known), i, false
  end
  local seq = redis.call('HINCRBY', KEYS[S], 'last_seq', 1)
  redis.call('HSET', KEYS[EV], seq, body)
  redis.call('HSET', KEYS[IDS], id, seq)
  redis.call('HSET', KEYS[SID], seq, id)
  redis.call('HSET', KEYS[TOK], seq, tokens)
  redis.call('ZADD', KEYS[ARC], seq, seq)
  if ctx_pos then redis.call('ZADD', KEYS[CTX], ctx_pos, seq) end
  if inv ~= '' then redis.call('HSETNX', KEYS[INV], inv, seq) end
  if sdelta ~= '' then redis.call('HSET', KEYS[DL], seq, sdelta) end
  redis.call('HINCRBY', KEYS[S], 'event_count', 1)
  i = apply_kv(KEYS[ST], i)
  if STANDALONE then
    local app, user = owner()
    i = apply_kv(user_key(app, user), i)
    i = apply_kv(app_key(app), i)
  else
    i = skip_kv(i); i = skip_kv(i)
  end
  return seq, i, true
end
