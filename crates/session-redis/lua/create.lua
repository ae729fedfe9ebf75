-- ARGV[4] id; ARGV[5..] field/value pairs count then pairs; then state, user, app kv lists;
-- then initial state kv list.
if redis.call('EXISTS', KEYS[S]) == 1 then
  local exp = redis.call('HGET', KEYS[S], 'expires_at')
  if not (exp and exp ~= '' and tonumber(exp) <= NOW) then return redis.error_reply('EXISTS the session id is taken') end
  -- Replacing an expired session: its old owner's indexes forget it.
  if STANDALONE then
    local app, user, key = owner()
    redis.call('ZREM', PREFIX .. ':idx:o:' .. app .. '/' .. user, ARGV[4])
    if key and key ~= '' then redis.call('ZREM', PREFIX .. ':idx:k:' .. app .. '/' .. key, ARGV[4]) end
  end
  redis.call('DEL', unpack(KEYS))
end
local n = tonumber(ARGV[5])
local i = 6
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
i = apply_kv(KEYS[INIT], i)
index(ARGV[4])
touch()
return 1
