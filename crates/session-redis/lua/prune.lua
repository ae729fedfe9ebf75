-- Persists an archive prune as planned: header; a count of seqs to remove;
-- head fields. The events go with their ids and deltas; their postings stay
-- in the search index (seqs are never reused, a stale posting only costs a
-- lookup). An invocation whose first event went starts, for rewinds, at its
-- next event still held, or is forgotten when none is. Returns how many
-- events went, or -1 when the head moved.
if not begin(true) then return -1 end
local removed, bytes = 0, 0
local moved = {}
local function event_at(seq)
  local ok, e = pcall(cjson.decode, redis.call('HGET', KEYS[EV], seq) or '')
  if ok and type(e) == 'table' then return e end
  return nil
end
for _ = 1, count() do
  local seq = arg()
  if redis.call('ZREM', KEYS[ARC], seq) == 1 then
    removed = removed + 1
    local body = redis.call('HGET', KEYS[EV], seq)
    bytes = bytes + string.len(body or '')
    local e = event_at(seq)
    if e and e.id then redis.call('HDEL', KEYS[IDS], e.id) end
    local inv = e and e.invocation_id
    if type(inv) == 'string' and tonumber(redis.call('HGET', KEYS[INV], inv)) == tonumber(seq) then
      moved[inv] = tonumber(seq)
    end
    redis.call('HDEL', KEYS[EV], seq)
    redis.call('HDEL', KEYS[DL], seq)
  end
end
for inv, from in pairs(moved) do
  local first = false
  for _, seq in ipairs(redis.call('ZRANGEBYSCORE', KEYS[ARC], '(' .. from, '+inf')) do
    local e = event_at(seq)
    if e and e.invocation_id == inv then
      first = seq
      break
    end
  end
  if first then redis.call('HSET', KEYS[INV], inv, first) else redis.call('HDEL', KEYS[INV], inv) end
end
set_head()
redis.call('HSET', KEYS[S], 'event_count', redis.call('ZCARD', KEYS[ARC]))
drop_bytes(bytes)
return removed
