-- Persists a rewind as planned: header; session id; owner keys; the first
-- seq to remove; the replayed session state; head fields; index scores;
-- TTL change. Returns how many events left, or -1 when the head moved.
if not begin(true) then return -1 end
local sid, o = arg(), owner()
local from = count()
local gone = redis.call('ZRANGEBYSCORE', KEYS[ARC], from, '+inf')
local bytes = 0
for _, seq in ipairs(gone) do
  local body = redis.call('HGET', KEYS[EV], seq)
  bytes = bytes + string.len(body or '')
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
apply_kv(KEYS[ST])
set_head()
local tokens = 0
for _, seq in ipairs(redis.call('ZRANGE', KEYS[CTX], 0, -1)) do tokens = tokens + tokens_of(seq) end
redis.call('HSET', KEYS[S], 'context_tokens', string.format('%.0f', tokens),
  'event_count', redis.call('ZCARD', KEYS[ARC]))
drop_bytes(bytes)
index(o, sid)
touch()
return #gone
