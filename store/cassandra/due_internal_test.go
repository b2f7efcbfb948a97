package cassandra

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sundialhq/sundial/store"
)

func TestDueBatchesBoundStatementsAndBytes(t *testing.T) {
	t.Parallel()
	entries := func(payloads ...int) []store.DueEntry {
		out := make([]store.DueEntry, len(payloads))
		for i, n := range payloads {
			out[i].Payload = make([]byte, n)
		}
		return out
	}
	const mib = 1 << 20
	for _, tc := range []struct {
		name    string
		entries []store.DueEntry
		want    []int // statements per batch
	}{
		{"none", nil, nil},
		{"small, under BatchSize", entries(10, 10, 10), []int{3}},
		{"small, cut at BatchSize", entries(10, 10, 10, 10, 10), []int{4, 1}},
		{"cut before the byte bound", entries(3*mib, 2*mib, 1), []int{1, 2}},
		{"exactly the byte bound", entries(2*mib, 2*mib, 1), []int{2, 1}},
		{"an entry over the bound goes alone", entries(1, 5*mib, 1), []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &Store{cfg: Config{BatchSize: 4}}
			var got []int
			total := 0
			for b := range s.dueBatches(tc.entries) {
				got = append(got, len(b))
				total += len(b)
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, len(tc.entries), total, "every entry in one batch")
		})
	}
}
