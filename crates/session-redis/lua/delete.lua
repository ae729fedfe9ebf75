-- Removes a session and its index entries: header; session id; owner keys.
-- Returns 1, 0 when there is no session, or -1 when the head moved.
if not begin(false) then return -1 end
if redis.call('EXISTS', KEYS[S]) == 0 then return 0 end
local sid, o = arg(), owner()
unindex(o, sid)
drop_search()
redis.call('DEL', unpack(KEYS))
return 1
