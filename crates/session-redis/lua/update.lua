-- Persists a session update as planned: header; session id; owner keys;
-- head fields; '1' to replace the state (then its key/value list) or '0'
-- (then an empty list); index scores; TTL change. Returns 1, or -1 when
-- the head moved.
if not begin(true) then return -1 end
local sid, o = arg(), owner()
set_head()
if arg() == '1' then redis.call('DEL', KEYS[ST]) end
apply_kv(KEYS[ST])
index(o, sid)
touch()
return 1
