package topics

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Result says what Ensure found or did for one topic.
type Result struct {
	Name       string
	Partitions int32
	// Created is true when this call created the topic.
	Created bool
}

// PartitionMismatchError reports a topic that exists with another partition
// count than Sundial needs.
type PartitionMismatchError struct {
	Topic      string
	Have       int32
	Want       int32
	ShardsHint bool
}

func (e *PartitionMismatchError) Error() string {
	msg := fmt.Sprintf("topic %s has %d partitions, Sundial needs %d", e.Topic, e.Have, e.Want)
	if e.ShardsHint {
		msg += " (one per shard: was the cluster initialised with another shard count?)"
	}
	return msg + "; repartitioning would move jobs between partitions, so it is not done automatically"
}

// Ensure creates the topics of specs that do not exist, with the given
// replication factor (-1 for the broker's default), and checks that those
// that exist have the right partition count. It returns one Result per spec
// and an error naming every topic that is wrong or could not be created.
// Existing topics' configs are left alone.
func Ensure(ctx context.Context, adm *kadm.Client, specs []Spec, replication int16) ([]Result, error) {
	if replication == 0 || replication < -1 {
		return nil, fmt.Errorf("ensure topics: replication factor %d: must be positive or -1 for the broker default", replication)
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	existing, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("ensure topics: list %v: %w", names, err)
	}
	results := make([]Result, 0, len(specs))
	var errs []error
	for _, spec := range specs {
		res, err := ensureOne(ctx, adm, spec, existing[spec.Name], replication)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		results = append(results, res)
	}
	return results, errors.Join(errs...)
}

func ensureOne(ctx context.Context, adm *kadm.Client, spec Spec, detail kadm.TopicDetail, replication int16) (Result, error) {
	switch {
	case detail.Err == nil && detail.Topic != "":
		return check(spec, detail)
	case detail.Err != nil && !errors.Is(detail.Err, kerr.UnknownTopicOrPartition):
		return Result{}, fmt.Errorf("topic %s: describe: %w", spec.Name, detail.Err)
	}
	configs := make(map[string]*string, len(spec.Configs))
	for k, v := range spec.Configs {
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := adm.CreateTopic(ctx, spec.Partitions, replication, configs, spec.Name)
	switch {
	case err == nil:
		return Result{Name: spec.Name, Partitions: spec.Partitions, Created: true}, nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		// Created concurrently by someone else: check what they made.
		again, lerr := adm.ListTopics(ctx, spec.Name)
		if lerr != nil {
			return Result{}, fmt.Errorf("topic %s: describe after a concurrent create: %w", spec.Name, lerr)
		}
		d := again[spec.Name]
		if d.Err != nil {
			return Result{}, fmt.Errorf("topic %s: describe after a concurrent create: %w", spec.Name, d.Err)
		}
		return check(spec, d)
	}
	if resp.ErrMessage != "" {
		return Result{}, fmt.Errorf("topic %s: create with %d partitions: %w: %s", spec.Name, spec.Partitions, err, resp.ErrMessage)
	}
	return Result{}, fmt.Errorf("topic %s: create with %d partitions: %w", spec.Name, spec.Partitions, err)
}

func check(spec Spec, detail kadm.TopicDetail) (Result, error) {
	have := int32(len(detail.Partitions))
	if have != spec.Partitions {
		return Result{}, &PartitionMismatchError{Topic: spec.Name, Have: have, Want: spec.Partitions, ShardsHint: spec.PerShard}
	}
	return Result{Name: spec.Name, Partitions: have}, nil
}
