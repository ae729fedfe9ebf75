-- ARGV[4] id, ARGV[5] count, then per event: seq, id, body, tokens, invocation,
-- session delta json, context position ('' = not in the context). For imports.
local i, n = 6, tonumber(ARGV[5])
for _ = 1, n do
  local seq, id, body, tok, inv, sdelta, pos = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  i = i + 7
  redis.call('HSET', KEYS[EV], seq, body)
  redis.call('HSET', KEYS[IDS], id, seq)
  redis.call('ZADD', KEYS[ARC], seq, seq)
  if pos ~= '' then redis.call('ZADD', KEYS[CTX], pos, seq) end
  if inv ~= '' then
    local known = redis.call('HGET', KEYS[INV], inv)
    if (not known) or tonumber(known) > tonumber(seq) then redis.call('HSET', KEYS[INV], inv, seq) end
  end
  if sdelta ~= '' then redis.call('HSET', KEYS[DL], seq, sdelta) end
end
touch()
return 1
