-- ARGV[4] session id, ARGV[5] expected version, ARGV[6] first seq to remove,
-- then the replayed session state as a kv list (computed by the client).
local err = check(true)
if err then return err end
if redis.call('HGET', KEYS[S], 'version') ~= ARGV[5] then return -1 end
local full = check_version()
if full then return full end
local from = tonumber(ARGV[6])
local gone = redis.call('ZRANGEBYSCORE', KEYS[ARC], from, '+inf')
for _, seq in ipairs(gone) do
  local body = redis.call('HGET', KEYS[EV], seq)
  local ok, e = pcall(cjson.decode, body or '')
  if ok and type(e) == 'table' and e.id then redis.call('HDEL', KEYS[IDS], e.id) end
  redis.call('HDEL', KEYS[EV], seq)
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
redis.call('HSET', KEYS[S], 'context_tokens', context_tokens(), 'event_count', redis.call('ZCARD', KEYS[ARC]))
local version = bump()
index(ARGV[4])
touch()
return {version, #gone}
