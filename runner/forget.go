package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/jobspec"
)

// DefaultDirectForgetAfter is how long after its last heartbeat a departed
// member's directed topic may be deleted, once every run in it has been
// adopted. It is below discovery.DefaultDeadRetention (15 min), after
// which the directory forgets the member and nobody adopts its topic.
const DefaultDirectForgetAfter = 5 * time.Minute

// forgetEvery is how often at most the adopt loop looks for directed
// topics to delete (or every DirectForgetAfter, when shorter); each look
// costs two admin requests per candidate.
const forgetEvery = time.Minute

// forgettable decides whose directed topics a member self of pool may
// delete at now: the pool's other members that are not live, whose id can
// name a topic, and whose last heartbeat is at least after ago. Whether
// the topic still holds runs is asked of Kafka afterwards (drained). It
// does no I/O; the list is sorted.
func forgettable(members []discovery.Member, pool, self string, now time.Time, after time.Duration) []string {
	var ids []string
	for _, m := range members {
		if m.Pool == pool && m.ID != self && m.State != discovery.Live &&
			jobspec.CheckExecutorID(m.ID) == "" && now.Sub(m.Heartbeat) >= after {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// drained reports whether group has consumed every record of each
// partition of a topic: its committed offset is at the end offset, or it
// never committed and the partition holds no record.
func drained(ends kadm.ListedOffsets, committed kadm.OffsetResponses, topic string) bool {
	for p, end := range ends[topic] {
		if end.Err != nil {
			return false
		}
		c, ok := committed.Lookup(topic, p)
		switch {
		case ok && c.Err != nil:
			return false
		case ok && c.At >= end.Offset:
		case end.Offset == 0:
		default:
			return false
		}
	}
	return true
}

// forgetDirect deletes the directed topic of each departed member of the
// pool (forgettable) that the runners' group has drained, so that the
// topics of executors that never come back do not pile up. A router sends
// runs only to live members, and the runners' client never creates a
// topic by producing to it, so a run is never produced to a deleted topic
// and lost there. A member that comes back under the same id creates its
// topic again at start (router.start). It returns the ids whose topics
// were deleted; the caller stops consuming them.
func (r *router) forgetDirect(ctx context.Context, adm *kadm.Client, ids []string) ([]string, error) {
	var gone []string
	var errs []error
	for _, id := range ids {
		topic := r.cfg.Topics.Direct(id)
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: end offsets: %w", topic, err))
			continue
		}
		if _, ok := ends[topic]; !ok || ends.Error() != nil {
			if errors.Is(ends.Error(), kerr.UnknownTopicOrPartition) {
				gone = append(gone, id) // deleted by another runner of the pool
			}
			continue
		}
		committed, err := adm.FetchOffsetsForTopics(ctx, r.cfg.Group, topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: committed offsets: %w", topic, err))
			continue
		}
		if !drained(ends, committed, topic) {
			continue
		}
		res, err := adm.DeleteTopic(ctx, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("%s: delete: %w", topic, err))
			continue
		}
		r.log.Info("deleted the directed topic of an executor that left, every run in it adopted", "executor", id, "topic", topic)
		gone = append(gone, id)
	}
	return gone, errors.Join(errs...)
}
