-- In front of every write script (and of `common.lua`).
--
-- The keys' physical TTL: '0' leaves it, '1' sets every key to the
-- session's TTL target (the head's `ttl_at`, if any), '2' also makes every
-- key persistent when there is none. Keys created between two refreshes
-- get their TTL at the next; purge_expired removes anything left.
local function refresh_ttl(mode)
  if mode == '0' then return end
  local ttl = redis.call('HGET', KEYS[1], 'ttl_at')
  if ttl and ttl ~= '' then
    for i = 1, #KEYS do redis.call('PEXPIREAT', KEYS[i], ttl) end
  elseif mode == '2' then
    for i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end
  end
end
