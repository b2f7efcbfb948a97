package topics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
// that exist have the right partition count. It returns one Result per good
// topic and an error naming every topic that is wrong or could not be
// created. Existing topics' configs are left alone. It returns once every
// topic it reports is visible in the cluster's metadata.
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
	var (
		results []Result
		errs    []error
		pending []Spec // created now or concurrently: check once visible
		created = map[string]bool{}
	)
	for _, spec := range specs {
		d := existing[spec.Name]
		switch {
		case d.Err == nil && len(d.Partitions) > 0:
			res, err := check(spec, d)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			results = append(results, res)
			continue
		case d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			errs = append(errs, fmt.Errorf("topic %s: describe: %w", spec.Name, d.Err))
			continue
		}
		configs := make(map[string]*string, len(spec.Configs))
		for k, v := range spec.Configs {
			configs[k] = kadm.StringPtr(v)
		}
		resp, err := adm.CreateTopic(ctx, spec.Partitions, replication, configs, spec.Name)
		switch {
		case err == nil:
			created[spec.Name] = true
		case errors.Is(err, kerr.TopicAlreadyExists):
			// Created concurrently, or not yet in the metadata we read.
		case resp.ErrMessage != "":
			errs = append(errs, fmt.Errorf("topic %s: create with %d partitions: %w: %s", spec.Name, spec.Partitions, err, resp.ErrMessage))
			continue
		default:
			errs = append(errs, fmt.Errorf("topic %s: create with %d partitions: %w", spec.Name, spec.Partitions, err))
			continue
		}
		pending = append(pending, spec)
	}
	visible, err := waitVisible(ctx, adm, pending)
	for _, spec := range pending {
		d, ok := visible[spec.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("topic %s: not visible in the cluster metadata: %w", spec.Name, err))
			continue
		}
		res, cerr := check(spec, d)
		if cerr != nil {
			errs = append(errs, cerr)
			continue
		}
		res.Created = created[spec.Name]
		results = append(results, res)
	}
	return results, errors.Join(errs...)
}

// waitVisible polls the metadata until every topic of specs has its
// partitions, or ctx ends: a topic just created reaches every broker's
// metadata cache a moment later. It returns what became visible.
func waitVisible(ctx context.Context, adm *kadm.Client, specs []Spec) (map[string]kadm.TopicDetail, error) {
	visible := map[string]kadm.TopicDetail{}
	if len(specs) == 0 {
		return visible, nil
	}
	wait := 20 * time.Millisecond
	for {
		var missing []string
		for _, s := range specs {
			if _, ok := visible[s.Name]; !ok {
				missing = append(missing, s.Name)
			}
		}
		if len(missing) == 0 {
			return visible, nil
		}
		details, err := adm.ListTopics(ctx, missing...)
		if err == nil {
			for name, d := range details {
				if d.Err == nil && len(d.Partitions) > 0 {
					visible[name] = d
				}
			}
			if len(visible) == len(specs) {
				return visible, nil
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return visible, context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func check(spec Spec, detail kadm.TopicDetail) (Result, error) {
	have := int32(len(detail.Partitions))
	if have != spec.Partitions {
		return Result{}, &PartitionMismatchError{Topic: spec.Name, Have: have, Want: spec.Partitions, ShardsHint: spec.PerShard}
	}
	return Result{Name: spec.Name, Partitions: have}, nil
}

// Setup connects to brokers and ensures every topic of names for a cluster of
// the given shard count. opts are further client options (TLS, SASL). It
// returns within ctx's deadline when Kafka cannot be reached.
func Setup(ctx context.Context, brokers []string, names Names, shards int, replication int16, opts ...kgo.Opt) ([]Result, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka brokers: at least one seed broker is required")
	}
	specs, err := names.Specs(shards)
	if err != nil {
		return nil, err
	}
	return EnsureAt(ctx, brokers, specs, replication, opts...)
}

// EnsureAt connects to brokers and ensures the topics of specs (Ensure).
func EnsureAt(ctx context.Context, brokers []string, specs []Spec, replication int16, opts ...kgo.Opt) ([]Result, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka brokers: at least one seed broker is required")
	}
	return EnsureWith(ctx, append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...), specs, replication)
}

// EnsureWith connects with the client options kafka (the seed brokers
// among them) and ensures the topics of specs (Ensure).
func EnsureWith(ctx context.Context, kafka []kgo.Opt, specs []Spec, replication int16) ([]Result, error) {
	cl, err := kgo.NewClient(kafka...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	res, err := Ensure(ctx, kadm.NewClient(cl), specs, replication)
	if err != nil {
		return res, fmt.Errorf("kafka at %v: %w", cl.OptValue(kgo.SeedBrokers), err)
	}
	return res, nil
}

// EnsureTeam makes team's job topic, sundial.jobs.<team>, as `sundial
// migrate --teams` makes it (TeamJobsSpec), when it does not exist, and
// checks one that does (Ensure): the one rule for a team's topic, whoever
// makes it. kafka are the client options, the seed brokers among them.
func EnsureTeam(ctx context.Context, kafka []kgo.Opt, names Names, team string, replication int16) (Result, error) {
	if err := ValidTeam(team); err != nil {
		return Result{}, err
	}
	res, err := EnsureWith(ctx, kafka, []Spec{names.TeamJobsSpec(team)}, replication)
	if err != nil {
		return Result{}, err
	}
	if len(res) != 1 {
		return Result{}, fmt.Errorf("ensure topic %s: no result", names.TeamJobs(team))
	}
	return res[0], nil
}
