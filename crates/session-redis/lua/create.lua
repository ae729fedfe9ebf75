-- Writes a whole session (a create, or an import): header (the fingerprint
-- of what the client read: all '' when there was no session); session id;
-- the old owner's keys (a session replaced leaves their indexes); the new
-- owner's keys; the sessions-per-user quota (-1: none) and the clock;
-- head fields; session, user, app and initial state lists; events;
-- context; context changes; index scores; TTL change. Returns 1, -1 when
-- the head moved, or -3 when the owner already holds the quota of live
-- sessions.
if not begin(false) then return -1 end
local sid, old, o = arg(), owner(), owner()
local quota, now = tonumber(arg()), tonumber(arg())
if quota >= 0 and o.own ~= '' then
  local live = 0
  for _, s in ipairs(redis.call('ZRANGE', o.own, 0, -1)) do
    if s ~= sid then
      local exp = redis.call('ZSCORE', o.exp, s)
      if not exp or tonumber(exp) > now then live = live + 1 end
    end
  end
  if live >= quota then return -3 end
end
if redis.call('EXISTS', KEYS[S]) == 1 then
  unindex(old, sid)
  drop_search()
  redis.call('DEL', unpack(KEYS))
end
set_head()
apply_kv(KEYS[ST])
apply_kv(o.user)
apply_kv(o.app)
apply_kv(KEYS[INIT])
write_events()
write_context()
write_changes()
index(o, sid)
touch()
return 1
