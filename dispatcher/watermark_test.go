package dispatcher

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sundialhq/sundial/store"
)

// TestWatermarkTrailsNowWhileBucketsAreReadPageByPage drives a shard's core
// through five minutes of a steady schedule the way its owner does: each
// bucket read a page (loadPage entries) at a time while the core has room,
// every firing done at once, the watermark taken every WatermarkInterval.
// The watermark then moves at every tick and stays within a tick of now,
// however many entries a bucket holds. Under the rule before 30 November
// 2026 (held at the start of the bucket being read, read as it falls due)
// it moved at 12 of the 48 ticks, a mean of 18.8 s behind now: a new owner
// after a crash fired that much again.
func TestWatermarkTrailsNowWhileBucketsAreReadPageByPage(t *testing.T) {
	t.Parallel()
	const tick = DefaultWatermarkInterval
	for _, perMinute := range []int{60, 234, 1000} {
		t.Run(fmt.Sprintf("%d entries a minute", perMinute), func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
			c := newShardCore(coreConfig{
				Floor: start.Add(-time.Millisecond), Lookahead: DefaultLookahead, MisfireThreshold: time.Second,
				MaxInflight: 1000, MaxBacklog: 100000, MaxHeld: 100000, DedupeWindow: 2 * time.Minute,
			})
			var pages [][]store.DueEntry
			reading := false
			moved, ticks := 0, 0
			last := c.mark
			for now := start.Add(-15 * time.Second); now.Before(start.Add(5 * time.Minute)); now = now.Add(10 * time.Millisecond) {
				r := c.Poll(now)
				if !r.Load.IsZero() {
					pages, reading = bucketPages(r.Load, perMinute), true
				}
				for _, f := range r.Fire {
					c.Done(f.Entry, time.Time{})
				}
				for reading && c.Room(now) {
					if len(pages) == 0 {
						c.LoadDone()
						reading = false
						break
					}
					c.Loaded(now, pages[0])
					pages = pages[1:]
				}
				if now.Before(start.Add(time.Minute)) || now.Sub(start)%tick != 0 {
					continue
				}
				ticks++
				w := c.Watermark(now)
				if w.After(last) {
					moved++
					last = w
				}
				assert.LessOrEqual(t, now.Sub(w), tick, "at %s the watermark is %s", now.Format("15:04:05"), w.Format("15:04:05.000"))
			}
			assert.Equal(t, ticks, moved, "the watermark moves at every tick")
		})
	}
}

// bucketPages are the entries of bucket b, n spread evenly over its minute,
// in pages of loadPage as the owner hands them to the core.
func bucketPages(b time.Time, n int) [][]store.DueEntry {
	var pages [][]store.DueEntry
	var page []store.DueEntry
	for i := range n {
		due := b.Add(time.Duration(i) * time.Minute / time.Duration(n)).Truncate(time.Millisecond)
		page = append(page, store.DueEntry{JobID: fmt.Sprintf("job-%d", i), Due: due, Kind: store.KindTrigger, RunID: fmt.Sprintf("run-%d-%d", b.Unix(), i)})
		if len(page) == loadPage {
			pages, page = append(pages, page), nil
		}
	}
	return append(pages, page)
}
