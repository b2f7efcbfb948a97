-- KEYS: slots, holders. ARGV: run id, token.
-- Returns 1 when the holder's slot was freed, 0 when the lease is lost.
local slots, holders = KEYS[1], KEYS[2]
local run, token = ARGV[1], ARGV[2]

if not held(slots, holders, run, token, now_ms()) then
  return 0
end
redis.call('ZREM', slots, run)
redis.call('HDEL', holders, run)
return 1
