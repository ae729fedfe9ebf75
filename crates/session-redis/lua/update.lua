-- ARGV[4] id, ARGV[5] expected version ('' = any), ARGV[6] field count, field pairs,
-- then '1' + state kv list to replace the state, or '0'.
local err = check(true)
if err then return err end
local version = redis.call('HGET', KEYS[S], 'version')
if ARGV[5] ~= '' and version ~= ARGV[5] then return redis.error_reply('CONFLICT ' .. version) end
local full = check_version()
if full then return full end
local n = tonumber(ARGV[6])
local i = 7
for _ = 1, n do
  redis.call('HSET', KEYS[S], ARGV[i], ARGV[i + 1]); i = i + 2
end
if ARGV[i] == '1' then
  redis.call('DEL', KEYS[ST])
  apply_kv(KEYS[ST], i + 1)
end
if redis.call('HGET', KEYS[S], 'ttl_at') == '' then
  for k = 1, #KEYS do redis.call('PERSIST', KEYS[k]) end
end
bump()
index(ARGV[4])
touch()
return 1
