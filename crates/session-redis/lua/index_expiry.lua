-- Keeps a session's search index alive as long as the session (run on its
-- own). KEYS: the session head, the index watermark hash, the set of
-- trigram keys. ARGV: the time now (milliseconds).
-- The trigram keys expire at the `ttl_at` recorded when they were last
-- written. If that moment has passed while the session lives on (its TTL
-- was refreshed), postings may be gone: the index is dropped, to be
-- rebuilt (returns 2). If the session's expiry changed, every trigram key
-- follows it (returns 1). Otherwise nothing changes (returns 0).
local recorded = redis.call('HGET', KEYS[2], 'ttl_at') or ''
local ttl = redis.call('HGET', KEYS[1], 'ttl_at') or ''
if recorded == ttl then return 0 end
local keys = redis.call('SMEMBERS', KEYS[3])
if recorded ~= '' and tonumber(recorded) <= tonumber(ARGV[1]) then
  for i = 1, #keys, 1000 do
    redis.call('DEL', unpack(keys, i, math.min(i + 999, #keys)))
  end
  redis.call('DEL', KEYS[2], KEYS[3])
  return 2
end
for _, k in ipairs(keys) do
  if ttl == '' then redis.call('PERSIST', k) else redis.call('PEXPIREAT', k, ttl) end
end
redis.call('HSET', KEYS[2], 'ttl_at', ttl)
return 1
