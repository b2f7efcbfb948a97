-- KEYS: slots, holders, done mark of the run.
-- ARGV: run id, token, retention of the mark (ms).
-- Returns 1 when the run is marked done by this token (now, or by an earlier
-- call whose reply was lost), 0 when the lease is lost.
local slots, holders, done = KEYS[1], KEYS[2], KEYS[3]
local run, token, retention = ARGV[1], ARGV[2], ARGV[3]

local now = now_ms()
if held(slots, holders, run, token, now) then
  redis.call('SET', done, token, 'PX', retention)
  redis.call('ZREM', slots, run)
  redis.call('HDEL', holders, run)
  return 1
end
if redis.call('GET', done) == token then
  return 1
end
return 0
