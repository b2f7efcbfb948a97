package dagrun_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/dagengine/dagrun"
)

// FuzzUnmarshal feeds arbitrary bytes to the decoder of a DAG run's stored
// state (a row the engine reads back, possibly written by another build).
// It must never panic, and a state it accepts must survive its stored form
// unchanged.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"v":1,"run":"etl@1767261000000","dag":"etl","due":1767261000000,"status":"running","created":1767261000001,"seq":3,` +
		`"nodes":[{"id":"a","p":"succeeded","s":1767261000002,"e":1767261000003,"a":1,"rs":4},{"id":"b","p":"waiting"}],` +
		`"outbox":[{"seq":3,"node":"a","state":2,"t":1767261000003,"run":"etl@1767261000000/a"}]}`))
	f.Add([]byte(`{"v":1,"status":"failed","stuck":true,"nodes":[]}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"status":"running","nodes":[{"id":"a","p":"bogus"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := dagrun.Unmarshal(data)
		if err != nil {
			return
		}
		b, err := dagrun.Marshal(s)
		require.NoError(t, err)
		back, err := dagrun.Unmarshal(b)
		require.NoError(t, err)
		require.Equal(t, normalize(s), normalize(back))
	})
}
