package bench

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMeasureKafkaWaitsForTheFirstRecord: a consumer whose first fetch
// answers only after the window would have ended (a busy machine's slow
// start) still measures a rate: the window starts once a first record has
// made the round trip. Found by CI: "baseline K: nothing consumed" with
// 1 s windows.
func TestMeasureKafkaWaitsForTheFirstRecord(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	const window = 200 * time.Millisecond
	var once sync.Once
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { c.SleepControl(func() { time.Sleep(2 * window) }) })
		return nil, nil, false
	})
	k, err := MeasureKafka(t.Context(), c.ListenAddrs(), "baseline.k", 4, 100, window)
	require.NoError(t, err)
	assert.Positive(t, k.Records)
	assert.Positive(t, k.RecordsPerSec)
}
