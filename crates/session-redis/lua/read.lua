-- What a write depends on, read at once. ARGV: a count and the head field
-- names; '1' to also return each held event's token estimate; then event
-- ids. Returns the head fields (nil where absent), the seq of each id (nil
-- where the session does not hold it) and the token estimates.
local fields = {}
for _ = 1, count() do fields[#fields + 1] = arg() end
local head = redis.call('HMGET', KEYS[S], unpack(fields))
local with_tokens = arg() == '1'
local seqs, tokens = {}, {}
for i = at, #ARGV do
  local seq = redis.call('HGET', KEYS[IDS], ARGV[i])
  seqs[#seqs + 1] = seq
  if with_tokens then tokens[#tokens + 1] = seq and tokens_of(seq) or 0 end
end
return { head, seqs, tokens }
