-- ARGV[4] session id, ARGV[5] expected version, ARGV[6] first seq to remove,
-- then the replayed session state as a kv list (computed by the client).
local err = check(true)
if err then return err end
if redis.call('HGET', KEYS[S], 'version') ~= ARGV[5] then return -1 end
local from = tonumber(ARGV[6])
local gone = redis.call('ZRANGEBYSCORE', KEYS[ARC], from, '+inf')
for _, seq in ipairs(gone) do
  local id = redis.call('HGET', KEYS[SID], seq)
  if id then redis.call('HDEL', KEYS[IDS], id) end
  redis.call('HDEL', KEYS[SID], seq)
  redis.call('HDEL', KEYS[EV], seq)
  redis.call('HDEL', KEYS[TOK], seq)
  redis.call('HDEL', KEYS[DL], seq)
  redis.call('ZREM', KEYS[ARC], seq)
  redis.call('ZREM', KEYS[CTX], seq)
end
local invs = redis.call('HGETALL', KEYS[INV])
for j = 1, #invs, 2 do
  if tonumber(invs[j + 1]) >= from then redis.call('HDEL', KEYS[INV], invs[j]) end
end
redis.call('DEL', KEYS[ST])
apply_kv(KEYS[ST], 7)
local seqs = redis.call('ZRANGE', KEYS[CTX], 0, -1)
local tokens = 0
if #seqs > 0 then
  for _, t in ipairs(redis.call('HMGET', KEYS[TOK], unpack(seqs))) do tokens = tokens + tonumber(t) end
end
redis.call('HSET', KEYS[S], 'context_tokens', tokens, 'event_count', redis.call('ZCARD', KEYS[ARC]))
local version = bump()
index(ARGV[4])
touch()
return {version, #gone}
