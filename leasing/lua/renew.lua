-- KEYS: slots, holders. ARGV: run id, token, ttl (ms).
-- Returns 1 when the holder's expiry was pushed to now + ttl, 0 when the
-- lease is lost.
local slots, holders = KEYS[1], KEYS[2]
local run, token, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])

local now = now_ms()
if not held(slots, holders, run, token, now) then
  return 0
end
redis.call('ZADD', slots, now + ttl, run)
keep_alive(slots, holders, now)
return 1
