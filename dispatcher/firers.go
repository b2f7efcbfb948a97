package dispatcher

import (
	"sync"
	"time"
)

// firerIdle is how long a firing goroutine waits for another firing before
// it exits.
const firerIdle = time.Second

// firers runs firings on goroutines kept from one firing to the next. A
// firing goes deep (the schedule, protobuf, the Kafka client, the store),
// and a goroutine started per firing grew its stack from the smallest size
// each time: copying stacks was 8% of a dispatcher's CPU at 1,000
// firings/s. A firing goes to a goroutine that waits for one, else to a new
// goroutine, so firings are never limited here (MaxInflight and MaxFiring
// limit them); a goroutine with nothing to do for idle exits. The
// dispatcher's owners share one; Stop, once every owner has drained, ends
// the goroutines that wait and waits for the others.
type firers struct {
	work chan func()
	quit chan struct{}
	idle time.Duration
	wg   sync.WaitGroup
	once sync.Once
}

func newFirers(idle time.Duration) *firers {
	return &firers{work: make(chan func()), quit: make(chan struct{}), idle: idle}
}

// Go runs fn on a waiting goroutine, or a new one.
func (f *firers) Go(fn func()) {
	select {
	case f.work <- fn:
	default:
		f.wg.Go(func() { f.loop(fn) })
	}
}

func (f *firers) loop(fn func()) {
	t := time.NewTimer(f.idle)
	defer t.Stop()
	for {
		fn()
		t.Reset(f.idle)
		select {
		case fn = <-f.work:
		case <-t.C:
			return
		case <-f.quit:
			return
		}
	}
}

// Stop ends the waiting goroutines and waits for every goroutine. Call it
// once nothing calls Go any more. Idempotent.
func (f *firers) Stop() {
	f.once.Do(func() { close(f.quit) })
	f.wg.Wait()
}
