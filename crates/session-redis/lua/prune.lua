-- Persists an archive prune as planned: header; a count of seqs to remove;
-- head fields. The events go with their ids and deltas; their postings stay
-- in the search index (seqs are never reused, a stale posting only costs a
-- lookup). Returns how many events went, or -1 when the head moved.
if not begin(true) then return -1 end
local removed, bytes = 0, 0
for _ = 1, count() do
  local seq = arg()
  if redis.call('ZREM', KEYS[ARC], seq) == 1 then
    removed = removed + 1
    local body = redis.call('HGET', KEYS[EV], seq)
    bytes = bytes + string.len(body or '')
    local ok, e = pcall(cjson.decode, body or '')
    if ok and type(e) == 'table' and e.id then redis.call('HDEL', KEYS[IDS], e.id) end
    redis.call('HDEL', KEYS[EV], seq)
    redis.call('HDEL', KEYS[DL], seq)
  end
end
set_head()
redis.call('HSET', KEYS[S], 'event_count', redis.call('ZCARD', KEYS[ARC]))
drop_bytes(bytes)
return removed
