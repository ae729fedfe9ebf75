-- ARGV[4] session id, ARGV[5] expected version, ARGV[6] count, then insert() records.
local err = check(true)
if err then return err end
if redis.call('HGET', KEYS[S], 'version') ~= ARGV[5] then return 0 end
redis.call('DEL', KEYS[CTX])
local i, n = 7, tonumber(ARGV[6])
for _ = 1, n do
  local pos = redis.call('HINCRBY', KEYS[S], 'next_ctx_pos', 1) - 1
  local known = redis.call('HGET', KEYS[IDS], ARGV[i])
  if known then
    redis.call('ZADD', KEYS[CTX], pos, known)
    i = i + 5; i = skip_kv(i); i = skip_kv(i); i = skip_kv(i)
  else
    local _, next_i = insert(i, pos)
    i = next_i
  end
end
local seqs = redis.call('ZRANGE', KEYS[CTX], 0, -1)
local tokens = 0
if #seqs > 0 then
  for _, t in ipairs(redis.call('HMGET', KEYS[TOK], unpack(seqs))) do tokens = tokens + tonumber(t) end
end
redis.call('HSET', KEYS[S], 'context_tokens', tokens)
bump()
index(ARGV[4])
touch()
return 1
