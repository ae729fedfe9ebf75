-- ARGV[4] session id, ARGV[5] event count, then one insert() record per event.
local h, err = load_head()
if not h then return err end
local i, n = 6, tonumber(ARGV[5])
local full = check_room(h, i, n)
if full then return full end
local seqs, written = {}, 0
for _ = 1, n do
  local tok = tonumber(ARGV[i + 2])
  local seq, next_i, new = insert(h, i, true)
  if new then
    written = written + 1
    h.context_tokens = h.context_tokens + tok
  end
  seqs[#seqs + 1] = seq
  i = next_i
end
if written > 0 then
  save_head(h, {'context_tokens', h.context_tokens})
  index_head(h, ARGV[4])
  touch(false, h.version)
end
-- The owner is only needed by a cluster client (it writes the shared scopes and indexes).
if STANDALONE then return {h.version, written, '', '', '', seqs} end
return {h.version, written, h.app, h.user, h.key or '', seqs}
