-- ARGV[4] id. Removes the session and its index entries.
if redis.call('EXISTS', KEYS[S]) == 0 then return 0 end
drop(ARGV[4])
return 1
