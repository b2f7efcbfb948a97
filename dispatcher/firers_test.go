package dispatcher

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestFirersReuseTheirGoroutines: a firing goes to a goroutine that waits
// for one; firings at once get goroutines of their own; a goroutine idle
// for the idle time exits, and Stop ends the rest.
func TestFirersReuseTheirGoroutines(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFirers(time.Second)
		done := make(chan struct{})
		f.Go(func() { done <- struct{}{} })
		<-done
		synctest.Wait()
		f.Go(func() { done <- struct{}{} }) // to the goroutine that waits
		<-done
		synctest.Wait()

		release := make(chan struct{})
		for range 3 { // at once: two more goroutines
			f.Go(func() { <-release })
		}
		synctest.Wait()
		close(release)
		synctest.Wait()
		time.Sleep(2 * time.Second) // idle: every goroutine exits
		synctest.Wait()
		f.Go(func() { done <- struct{}{} }) // a new one
		<-done
		f.Stop()
		f.Stop()
		assert.NotPanics(t, f.Stop, "idempotent")
	})
}
