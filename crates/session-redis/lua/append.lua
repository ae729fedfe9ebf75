-- Persists an append or a context replace as planned: header; session id;
-- owner keys; events; context; context changes; session, user and app state changes; head
-- fields; index scores; TTL change. Returns 1, -1 when the head moved, or
-- -2 when the session already holds one of the new events' ids.
if not begin(true) then return -1 end
local sid, o = arg(), owner()
if holds_any_event() then return -2 end
write_events()
write_context()
write_changes()
apply_kv(KEYS[ST])
apply_kv(o.user)
apply_kv(o.app)
set_head()
index(o, sid)
touch()
return 1
