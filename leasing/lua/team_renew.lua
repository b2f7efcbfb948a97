-- KEYS: the team's slots. ARGV: ttl (ms), run ids...
-- Extends the slots of the runs, adding back any that expired: they are
-- still executing, and the count must say so. Returns the slots in use.
local slots = KEYS[1]
local ttl = tonumber(ARGV[1])
local now = now_ms()

redis.call('ZREMRANGEBYSCORE', slots, '-inf', '(' .. now)
for i = 2, #ARGV do
  redis.call('ZADD', slots, now + ttl, ARGV[i])
end
if #ARGV > 1 then
  redis.call('PEXPIRE', slots, ttl)
end
return redis.call('ZCARD', slots)
