-- KEYS: the team's slots. ARGV: run id, the team's limit, ttl (ms).
-- Returns 1 when the run holds one of the team's slots (a slot it held
-- already is refreshed: a retried call or a redelivery), 0 when every slot
-- is taken.
local slots = KEYS[1]
local run, limit, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()

redis.call('ZREMRANGEBYSCORE', slots, '-inf', '(' .. now)
if not redis.call('ZSCORE', slots, run) and redis.call('ZCARD', slots) >= limit then
  return 0
end
redis.call('ZADD', slots, now + ttl, run)
redis.call('PEXPIRE', slots, ttl)
return 1
