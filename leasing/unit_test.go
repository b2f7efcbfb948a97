package leasing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	tests := []struct {
		name  string
		cfg   Config
		wants []string // substrings of the error, one per bad field; none = valid
	}{
		{name: "defaults", cfg: Config{Client: client}},
		{name: "explicit", cfg: Config{Client: client, KeyPrefix: "x:", TTL: time.Second, Margin: 600 * time.Millisecond, DoneRetention: time.Minute}},
		{name: "no client", cfg: Config{}, wants: []string{"Client: is required"}},
		{name: "brace in prefix", cfg: Config{Client: client, KeyPrefix: "a{b}:"}, wants: []string{"KeyPrefix:"}},
		{name: "short ttl", cfg: Config{Client: client, TTL: 5 * time.Millisecond}, wants: []string{"TTL: 5ms is below"}},
		{name: "sub-ms ttl", cfg: Config{Client: client, TTL: 20*time.Millisecond + time.Microsecond}, wants: []string{"TTL:", "whole number"}},
		{name: "negative margin", cfg: Config{Client: client, Margin: -time.Second}, wants: []string{"Margin: -1s is negative"}},
		{name: "margin too large", cfg: Config{Client: client, TTL: 3 * time.Second, Margin: 2 * time.Second}, wants: []string{"Margin: 2s is not below two thirds"}},
		{name: "negative retention", cfg: Config{Client: client, DoneRetention: -time.Hour}, wants: []string{"DoneRetention: -1h0m0s is not positive"}},
		{
			name:  "every bad field is reported",
			cfg:   Config{KeyPrefix: "{", TTL: -time.Second, Margin: -1, DoneRetention: time.Microsecond},
			wants: []string{"Client:", "KeyPrefix:", "TTL:", "Margin:", "DoneRetention:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			_, newErr := New(tt.cfg)
			if len(tt.wants) == 0 {
				require.NoError(t, err)
				require.NoError(t, newErr)
				return
			}
			require.Error(t, err)
			require.Error(t, newErr, "New validates")
			for _, w := range tt.wants {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{TTL: 5 * time.Second}.withDefaults()
	assert.Equal(t, DefaultKeyPrefix, c.KeyPrefix)
	assert.Equal(t, time.Second, c.Margin, "margin defaults to TTL/5")
	assert.Equal(t, DefaultDoneRetention, c.DoneRetention)
	assert.NotNil(t, c.Now)
	assert.Equal(t, DefaultTTL, Config{}.withDefaults().TTL)
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("acquire: %w", io.EOF), true},
		{io.ErrUnexpectedEOF, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("x: %w", &net.OpError{Op: "dial", Err: context.DeadlineExceeded}), true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{syscall.EPIPE, true},
		{redis.ErrPoolTimeout, true},
		{redis.ErrNoScript, true},
		{fmt.Errorf("x: %w", redis.ErrNoScript), true},
		{context.Canceled, false},
		{fmt.Errorf("renew: %w", context.DeadlineExceeded), false},
		{redis.ErrClosed, false},
		{redis.Nil, false},
		{fmt.Errorf("run: %w", ErrAlreadyDone), false},
		{&NoSlotError{JobID: "j", Limit: 1, Holders: []string{"j@1"}}, false},
		{fmt.Errorf("x: %w", ErrRunHeld), false},
		{fmt.Errorf("x: %w", ErrLeaseLost), false},
		{ErrLeaseUntrusted, false},
		{errors.New("WRONGTYPE"), false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, IsRetryable(tt.err))
		})
	}
}

func TestRedisReplyErrorsAreRetryable(t *testing.T) {
	t.Parallel()
	// Real replies, so the classification sees go-redis's own error type.
	b := miniRedis(t)
	c := b.client(t)
	ctx := t.Context()
	for _, msg := range []string{"LOADING Redis is loading", "READONLY replica", "TRYAGAIN x", "CLUSTERDOWN x", "MASTERDOWN x",
		"MOVED 6345 127.0.0.1:26104", "ASK 6345 127.0.0.1:26104"} {
		_, err := c.Do(ctx, "EVAL", "return redis.error_reply('"+msg+"')", 0).Result()
		require.Error(t, err)
		assert.True(t, IsRetryable(err), "%q", msg)
		assert.True(t, IsRetryable(fmt.Errorf("leasing: acquire job j run r: %w", err)), "%q wrapped", msg)
	}
	_, err := c.Do(ctx, "EVAL", "return redis.error_reply('ERR something else')", 0).Result()
	require.Error(t, err)
	assert.False(t, IsRetryable(err))
}

func TestNoSlotError(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("wrapped: %w", &NoSlotError{JobID: "j", Limit: 2, Holders: []string{"j@1", "j@2"}})
	require.ErrorIs(t, err, ErrNoSlot)
	var e *NoSlotError
	require.ErrorAs(t, err, &e)
	assert.Equal(t, []string{"j@1", "j@2"}, e.Holders)
	assert.Contains(t, err.Error(), "j@1, j@2")
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.cfg.Client.Close() })
	ctx := t.Context()
	tests := []struct {
		req   Request
		wants []string
	}{
		{Request{RunID: "r"}, []string{"JobID: is empty"}},
		{Request{JobID: "a}b", RunID: "r"}, []string{"JobID:", "'{' or '}'"}},
		{Request{JobID: "a"}, []string{"RunID: is empty"}},
		{Request{JobID: "a", RunID: "r", Limit: -2}, []string{"Limit: -2 is negative"}},
		{Request{Limit: -1}, []string{"JobID", "RunID", "Limit"}},
	}
	for _, tt := range tests {
		// No I/O happens: the client points nowhere.
		_, err := s.Acquire(ctx, tt.req)
		for _, w := range tt.wants {
			assert.ErrorContains(t, err, w)
		}
		assert.False(t, IsRetryable(err))
	}
	for _, l := range []Lease{{RunID: "r", Token: 1}, {JobID: "j", Token: 1}, {JobID: "j", RunID: "r"}} {
		_, err := s.Renew(ctx, l)
		assert.Error(t, err)
		assert.Error(t, s.Complete(ctx, l))
		assert.Error(t, s.Release(ctx, l))
	}
	_, err = s.Revoke(ctx, "", "r")
	assert.ErrorContains(t, err, "JobID")
}

// TestKeeperLifecycle stops Keepers before Start and twice, and starts them
// again after Stop, on Redis and on miniredis; goleak (TestMain) finds no
// renewal goroutine left behind.
func TestKeeperLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("Redis", func(t *testing.T) { t.Parallel(); testKeeperLifecycle(t, realRedis(t)) })
	t.Run("Miniredis", func(t *testing.T) { t.Parallel(); testKeeperLifecycle(t, miniRedis(t)) })
}

func testKeeperLifecycle(t *testing.T, b backend) {
	s, _ := setup(t, b)

	t.Run("stop before start", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		l, err := s.Acquire(ctx, Request{JobID: "a", RunID: "a@1"})
		require.NoError(t, err)
		k := NewKeeper(s, l, nil)
		require.Error(t, k.Context().Err(), "not started: already cancelled")
		k.Stop()
		k.Stop()
		require.Error(t, k.Context().Err(), "stopped before Start: still cancelled")
		require.NoError(t, k.Start(ctx), "a Keeper stopped before Start starts")
		require.NoError(t, k.Context().Err())
		k.Stop()
		require.ErrorIs(t, context.Cause(k.Context()), ErrKeeperStopped)
	})
	t.Run("start twice, stop twice", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		l, err := s.Acquire(ctx, Request{JobID: "b", RunID: "b@1"})
		require.NoError(t, err)
		k := NewKeeper(s, l, nil)
		require.NoError(t, k.Start(ctx))
		require.NoError(t, k.Context().Err())
		require.Error(t, k.Start(ctx))
		k.Stop()
		k.Stop()
		stopped := k.Context()
		require.ErrorIs(t, context.Cause(stopped), ErrKeeperStopped)

		// Started again while the lease is trusted: a new execution
		// context, the old one stays cancelled.
		require.NoError(t, k.Start(ctx))
		require.NoError(t, k.Context().Err())
		require.ErrorIs(t, context.Cause(stopped), ErrKeeperStopped)
		k.Stop()
		k.Stop()
		require.ErrorIs(t, context.Cause(k.Context()), ErrKeeperStopped)
		require.NoError(t, s.Complete(ctx, k.Lease()), "Stop leaves the lease to the caller")
	})
	t.Run("parent context ends", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		l, err := s.Acquire(ctx, Request{JobID: "c", RunID: "c@1"})
		require.NoError(t, err)
		parent, cancel := context.WithCancel(ctx)
		k := NewKeeper(s, l, nil)
		require.NoError(t, k.Start(parent))
		cancel()
		waitDone(t, k.Context(), 5*time.Second)
		k.Stop() // returns once the goroutine has gone; goleak checks the rest
		require.ErrorIs(t, context.Cause(k.Context()), context.Canceled)
	})
}
