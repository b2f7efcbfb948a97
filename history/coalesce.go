package history

import (
	"time"

	"github.com/sundialhq/sundial/store"
)

// attemptKey names one attempt of one run.
type attemptKey struct {
	jobID, runID string
	attempt      int
}

// coalescer folds the records of one poll into one record per attempt: the
// one with the latest UpdatedAt, at microsecond precision, as the store
// orders them; of equal times the one added last wins, which within a
// partition is the order the runner produced them in (all events of a job
// share its partition). It is pure: no I/O, no clock.
type coalescer struct {
	index map[attemptKey]int
	recs  []store.RunRecord
}

func newCoalescer() *coalescer { return &coalescer{index: map[attemptKey]int{}} }

// add folds r in.
func (c *coalescer) add(r store.RunRecord) {
	k := attemptKey{r.JobID, r.RunID, r.Attempt}
	i, ok := c.index[k]
	if !ok {
		c.index[k] = len(c.recs)
		c.recs = append(c.recs, r)
		return
	}
	if !micros(c.recs[i].UpdatedAt).After(micros(r.UpdatedAt)) {
		c.recs[i] = r
	}
}

// records returns one record per attempt, in the order the attempts were
// first seen.
func (c *coalescer) records() []store.RunRecord { return c.recs }

// len is the number of attempts folded so far.
func (c *coalescer) len() int { return len(c.recs) }

func micros(t time.Time) time.Time { return t.Truncate(time.Microsecond) }
