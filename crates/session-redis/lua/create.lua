-- ARGV[4] id; ARGV[5..] the session head as write_session() reads it.
if redis.call('EXISTS', KEYS[S]) == 1 then
  local exp = redis.call('HGET', KEYS[S], 'expires_at')
  if not (exp and exp ~= '' and tonumber(exp) <= NOW) then return redis.error_reply('EXISTS the session id is taken') end
  -- Replacing an expired session: its old owner's indexes forget it.
  drop(ARGV[4])
end
write_session(5)
index(ARGV[4])
touch()
return 1
