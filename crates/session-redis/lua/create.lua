-- Writes a whole session (a create, or an import): header (the fingerprint
-- of what the client read: all '' when there was no session); session id;
-- the old owner's keys (a session replaced leaves their indexes); the new
-- owner's keys; head fields; session, user, app and initial state lists;
-- events; context; context changes; index scores; TTL change. Returns 1, or -1 when the
-- head moved.
if not begin(false) then return -1 end
local sid, old, o = arg(), owner(), owner()
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
