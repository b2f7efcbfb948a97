package leasing

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/internal/deps"
)

// Defaults of Config.
const (
	DefaultKeyPrefix     = "sundial:lease:"
	DefaultTTL           = 10 * time.Second
	DefaultDoneRetention = time.Hour
	// MinTTL keeps renewals (every TTL/3) apart from the round trip to Redis.
	MinTTL = 10 * time.Millisecond
)

// Config configures a Store. The zero value of every field but Client means
// its default.
type Config struct {
	// Client talks to Redis: a single node, Sentinel or Redis Cluster.
	// Required. The store never closes it.
	Client redis.UniversalClient

	// KeyPrefix starts every key the store writes. It must not contain '{' or
	// '}': the job id in braces right after it is the key's cluster hash tag.
	// Default DefaultKeyPrefix.
	KeyPrefix string

	// TTL is how long a lease lives on the Redis server after each acquire or
	// renewal. A holder that dies keeps its slot this long. A whole number of
	// milliseconds, at least MinTTL. Default DefaultTTL.
	TTL time.Duration

	// Margin is subtracted from TTL to get how long the holder trusts its
	// lease (Lease.TrustedUntil). It absorbs the difference between the
	// holder's and the server's clock rates and pauses of the holder's
	// process. At least 0 and below two thirds of TTL, so that the first
	// renewal (at TTL/3) starts while the lease is trusted. Default TTL/5.
	Margin time.Duration

	// DoneRetention is how long a run's dedupe mark lives after it completed:
	// a redelivery of the run within it is refused with ErrAlreadyDone. Keep
	// it above the longest time a run can sit uncommitted in Kafka. A whole
	// number of milliseconds, positive. Default DefaultDoneRetention.
	DoneRetention time.Duration

	// Now is the holder's clock. Lease.AcquiredAt is read from it before each
	// acquire or renewal starts. Default time.Now.
	Now func() time.Time

	// Holder names the process that takes the leases, the same across its
	// restarts (a runner's --runner-id), and Incarnation tells its restarts
	// apart (default: Now at New, in milliseconds). An acquire of a run that
	// an earlier incarnation of the same Holder holds takes the lease over at
	// once, with a larger fencing token, instead of answering ErrRunHeld
	// until the TTL has passed: a process that restarted is not executing
	// what its earlier self leased. Two live processes under one Holder
	// would take each other's leases; Kafka's static membership, which
	// needs the same uniqueness, fences the older one too. Empty: leases
	// are taken over only when they expire. It must not contain '/'.
	Holder      string
	Incarnation int64
}

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	c.KeyPrefix = cmp.Or(c.KeyPrefix, DefaultKeyPrefix)
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	c.Margin = cmp.Or(c.Margin, c.TTL/5)
	c.DoneRetention = cmp.Or(c.DoneRetention, DefaultDoneRetention)
	c.Now = deps.Clock(c.Now)
	if c.Holder != "" && c.Incarnation == 0 {
		c.Incarnation = c.Now().UnixMilli()
	}
	return c
}

// Validate reports every invalid field of c, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("leasing config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Client == nil {
		bad("Client", "is required")
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		bad("KeyPrefix", "%q contains '{' or '}', which would move the job's cluster hash tag", c.KeyPrefix)
	}
	switch {
	case c.TTL < MinTTL:
		bad("TTL", "%s is below the minimum %s", c.TTL, MinTTL)
	case c.TTL%time.Millisecond != 0:
		bad("TTL", "%s is not a whole number of milliseconds (Redis keeps expiry in ms)", c.TTL)
	}
	switch {
	case c.Margin < 0:
		bad("Margin", "%s is negative", c.Margin)
	case c.Margin >= c.TTL*2/3:
		bad("Margin", "%s is not below two thirds of TTL %s: the lease would be distrusted before its first renewal", c.Margin, c.TTL)
	}
	if strings.Contains(c.Holder, "/") {
		bad("Holder", "%q contains '/', which separates it from the incarnation in the acquire's nonce", c.Holder)
	}
	if c.Incarnation < 0 {
		bad("Incarnation", "%d is negative", c.Incarnation)
	}
	switch {
	case c.DoneRetention < time.Millisecond:
		bad("DoneRetention", "%s is not positive", c.DoneRetention)
	case c.DoneRetention%time.Millisecond != 0:
		bad("DoneRetention", "%s is not a whole number of milliseconds", c.DoneRetention)
	}
	return errors.Join(errs...)
}
