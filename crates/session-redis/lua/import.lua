-- ARGV[4] id, ARGV[5] the dump's version; then the session head as
-- write_session() reads it, then the events as write_events() reads them.
-- One script, so concurrent imports of one dump are atomic: the first
-- writes, the others find the same version and change nothing (returns 0).
if redis.call('EXISTS', KEYS[S]) == 1 then
  local exp = redis.call('HGET', KEYS[S], 'expires_at')
  local live = not (exp and exp ~= '' and tonumber(exp) <= NOW)
  local version = tonumber(redis.call('HGET', KEYS[S], 'version'))
  if live and version and version >= tonumber(ARGV[5]) then return 0 end
  drop(ARGV[4])
end
local i = write_session(6)
write_events(i)
index(ARGV[4])
touch()
return 1
