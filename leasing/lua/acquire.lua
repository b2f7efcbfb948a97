-- KEYS: slots, holders, fence, done mark of the run, then the caller's
-- flag keys, if any (keys of the job's slot).
-- ARGV: run id, concurrency limit, ttl (ms), acquire nonce (random, or
-- '<holder>/<incarnation>/<random>' when the store names its holder).
-- Returns {1, token, flagged...} when the lease is taken (one flagged per
-- flag key: 1 when it exists, else 0), {0, 'done'} when the run's
-- dedupe mark exists, {0, 'held'} when the run already holds a slot under
-- another acquire (unless that acquire came from an earlier incarnation of
-- the caller's holder: then the caller takes the lease over), {0, 'full', {flagged...}, holder run ids...} when every
-- slot is taken.
local slots, holders, fence, done = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local run, limit, ttl, nonce = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]

if redis.call('EXISTS', done) == 1 then
  return {0, 'done'}
end

local now = now_ms()

local function flagged()
  local f = {}
  for i = 5, #KEYS do
    f[#f + 1] = redis.call('EXISTS', KEYS[i])
  end
  return f
end

local function taken(token)
  local reply = {1, token}
  for _, f in ipairs(flagged()) do
    reply[#reply + 1] = f
  end
  return reply
end

-- Reclaim the slots of holders that stopped renewing.
local expired = redis.call('ZRANGEBYSCORE', slots, '-inf', '(' .. now)
for _, member in ipairs(expired) do
  redis.call('ZREM', slots, member)
  redis.call('HDEL', holders, member)
end

-- successor reports whether nonce new ('<holder>/<incarnation>/<random>')
-- comes from a later incarnation of the holder that made nonce old.
local function successor(old, new)
  local oh, oi = string.match(old, '^(.+)/(%d+)/[^/]*$')
  local nh, ni = string.match(new, '^(.+)/(%d+)/[^/]*$')
  return oh ~= nil and nh == oh and tonumber(ni) > tonumber(oi)
end

if redis.call('ZSCORE', slots, run) then
  local token, n = holder(holders, run)
  if token and n == nonce then
    -- The same acquire, retried by the client after its reply was lost.
    return taken(tonumber(token))
  end
  if not (n and successor(n, nonce)) then
    return {0, 'held'}
  end
  -- The holder restarted since it took this lease: its earlier self is
  -- not executing the run any more, so the restart takes it over now, with
  -- a larger token, rather than after the TTL.
  redis.call('ZREM', slots, run)
  redis.call('HDEL', holders, run)
end

if redis.call('ZCARD', slots) >= limit then
  local reply = {0, 'full', flagged()}
  for _, member in ipairs(redis.call('ZRANGE', slots, 0, -1)) do
    reply[#reply + 1] = member
  end
  return reply
end

local token = redis.call('INCR', fence)
redis.call('ZADD', slots, now + ttl, run)
redis.call('HSET', holders, run, token .. ':' .. nonce)
keep_alive(slots, holders, now)
return taken(token)
