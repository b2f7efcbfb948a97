-- KEYS: the team's runs started in the current window (sorted set: member =
-- run id, score = the window it started in, the server's time in ms divided
-- by the window). ARGV: run id, the team's limit, the window (ms).
-- Returns {1, 0} when the run may start (counted now, or counted in this
-- window already: a retried call or a redelivery counts once), {0, ms} when
-- the team has started its limit of runs in this window, ms being the time
-- until the window ends.
local runs = KEYS[1]
local run, limit, window = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local w = math.floor(now / window)

redis.call('ZREMRANGEBYSCORE', runs, '-inf', '(' .. w)
if redis.call('ZSCORE', runs, run) then
  return {1, 0}
end
if redis.call('ZCARD', runs) >= limit then
  return {0, (w + 1) * window - now}
end
redis.call('ZADD', runs, w, run)
redis.call('PEXPIRE', runs, 2 * window)
return {1, 0}
