-- ARGV[4] id. Removes the session and its index entries.
if redis.call('EXISTS', KEYS[S]) == 0 then return 0 end
if STANDALONE then
  local app, user, key = owner()
  redis.call('ZREM', PREFIX .. ':idx:all', ARGV[4])
  redis.call('ZREM', PREFIX .. ':idx:o:' .. app .. '/' .. user, ARGV[4])
  if key and key ~= '' then redis.call('ZREM', PREFIX .. ':idx:k:' .. app .. '/' .. key, ARGV[4]) end
  redis.call('ZREM', PREFIX .. ':idx:exp', ARGV[4])
end
redis.call('DEL', unpack(KEYS))
return 1
