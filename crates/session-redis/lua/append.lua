-- ARGV[4] session id, ARGV[5] event count, then one insert() record per event.
local err = check(true)
if err then return err end
local i, n = 6, tonumber(ARGV[5])
local seqs, written, tokens = {}, 0, 0
for _ = 1, n do
  local tok = tonumber(ARGV[i + 2])
  local pos = redis.call('HINCRBY', KEYS[S], 'next_ctx_pos', 1) - 1
  local seq, next_i, new = insert(i, pos)
  if new then
    written = written + 1
    tokens = tokens + tok
  else
    redis.call('HINCRBY', KEYS[S], 'next_ctx_pos', -1)
  end
  seqs[#seqs + 1] = seq
  i = next_i
end
local version = tonumber(redis.call('HGET', KEYS[S], 'version'))
if written > 0 then
  redis.call('HINCRBY', KEYS[S], 'context_tokens', tokens)
  version = bump()
  index(ARGV[4])
  touch()
end
local app, user, key = owner()
return {version, written, app, user, key or '', seqs}
