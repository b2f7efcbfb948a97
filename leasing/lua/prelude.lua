-- Shared head of every leasing script. Times are milliseconds on the Redis
-- server's clock, which is the only clock that decides expiry.
--
-- Per job (all keys carry the job's hash tag):
--   slots    sorted set: member = run id of a holder, score = its expiry (ms)
--   holders  hash: run id -> '<fencing token>:<acquire nonce>'
--   fence    integer: the job's last fencing token (INCR), never expires
--   done:<run id>  string: the token that completed the run, expires after
--                  the retention

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- holder returns the token and the acquire nonce recorded for run, or nil.
local function holder(holders, run)
  local v = redis.call('HGET', holders, run)
  if not v then
    return nil, nil
  end
  return string.match(v, '^(%d+):(.*)$')
end

-- held reports whether run holds a live slot under token. An expired entry is
-- a lost lease whether or not another holder has taken the slot yet; it is
-- removed on the way so it cannot be renewed back to life.
local function held(slots, holders, run, token, now)
  local t = holder(holders, run)
  if t ~= token then
    return false
  end
  local expiry = redis.call('ZSCORE', slots, run)
  if expiry and tonumber(expiry) >= now then
    return true
  end
  redis.call('ZREM', slots, run)
  redis.call('HDEL', holders, run)
  return false
end

-- keep_alive lets the slot keys live exactly as long as their longest-lived
-- holder, so a job that stops running leaves nothing behind but its fence.
local function keep_alive(slots, holders, now)
  local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
  if last[2] then
    local ms = tonumber(last[2]) - now
    if ms > 0 then
      redis.call('PEXPIRE', slots, ms)
      redis.call('PEXPIRE', holders, ms)
    end
  end
end
