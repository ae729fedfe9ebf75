-- Extends one session's search index (run on its own, without common.lua).
-- KEYS: the session head, the index watermark hash, the set of trigram
-- keys, then the trigram keys. ARGV: the watermark the client read (''
-- for none), the new watermark, then for each trigram key the seqs to
-- append (LEB128 bytes). Appends only if the watermark is still the one
-- read (else another client indexed the same events first): returns 1, or
-- 0. The trigram keys expire with the session (`ttl_at`), and the hash
-- records that expiry so a later change can be followed (index_expiry.lua).
local through = redis.call('HGET', KEYS[2], 'through') or ''
if through ~= ARGV[1] then return 0 end
local ttl = redis.call('HGET', KEYS[1], 'ttl_at') or ''
for i = 4, #KEYS do
  redis.call('APPEND', KEYS[i], ARGV[i - 1])
  if ttl ~= '' then redis.call('PEXPIREAT', KEYS[i], ttl) end
end
for i = 4, #KEYS, 1000 do
  redis.call('SADD', KEYS[3], unpack(KEYS, i, math.min(i + 999, #KEYS)))
end
redis.call('HSET', KEYS[2], 'through', ARGV[2], 'ttl_at', ttl)
if ttl ~= '' then
  redis.call('PEXPIREAT', KEYS[2], ttl)
  redis.call('PEXPIREAT', KEYS[3], ttl)
end
return 1
