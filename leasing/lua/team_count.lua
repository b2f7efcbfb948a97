-- KEYS: the team's slots. Returns the slots in use (unexpired).
return redis.call('ZCOUNT', KEYS[1], now_ms(), '+inf')
