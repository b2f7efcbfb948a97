package discovery

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// FuzzApply: any record on the topic is applied or skipped, never a panic,
// and a member it lists is keyed by its record key.
func FuzzApply(f *testing.F) {
	ann := &sundialv1.ExecutorAnnouncement{ExecutorId: "e1", Pool: "p", HeartbeatTime: timestamppb.New(t0), HeartbeatIntervalMs: 1000}
	val, err := proto.Marshal(ann)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("e1"), val)
	f.Add([]byte("e1"), []byte{})
	f.Add([]byte(""), []byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		d, err := NewDirectory(DirectoryConfig{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}})
		if err != nil {
			t.Fatal(err)
		}
		d.mu.Lock()
		d.applyLocked(&kgo.Record{Key: key, Value: value}, t0.Add(time.Second))
		d.mu.Unlock()
		for _, m := range d.All() {
			if m.ID != string(key) {
				t.Fatalf("member %q listed under key %q", m.ID, key)
			}
		}
	})
}
