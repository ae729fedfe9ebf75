-- ARGV[4] session id, ARGV[5] expected version, ARGV[6] count, then insert() records.
local err = check(true)
if err then return err end
if redis.call('HGET', KEYS[S], 'version') ~= ARGV[5] then return 0 end
local h, herr = load_head()
if not h then return herr end
local i, n = 7, tonumber(ARGV[6])
local full = check_room(h, i, n) or check_version()
if full then return full end
redis.call('DEL', KEYS[CTX])
for _ = 1, n do
  local known = redis.call('HGET', KEYS[IDS], ARGV[i])
  if known then
    redis.call('ZADD', KEYS[CTX], h.next_ctx_pos, known)
    h.next_ctx_pos = h.next_ctx_pos + 1
    i = i + 5; i = skip_kv(i); i = skip_kv(i); i = skip_kv(i)
  else
    local _, next_i = insert(h, i, true)
    i = next_i
  end
end
save_head(h, {'context_tokens', context_tokens()})
index(ARGV[4])
touch()
return 1
