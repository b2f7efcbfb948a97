package embedded

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/client"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// Names of the sample handlers SampleHandlers provides.
const (
	HandlerHello = "dev.hello"
	HandlerFlaky = "dev.flaky"
	// HandlerNoop does nothing and succeeds, as the stock runner's "noop"
	// handler does: the jobs of docs/examples run in dev too.
	HandlerNoop = "noop"
)

// SampleHandlers are the in-process handlers the sample jobs call.
func SampleHandlers() map[string]target.Handler {
	return map[string]target.Handler{
		HandlerHello: target.HandlerFunc(func(context.Context, *sundialv1.Run) error { return nil }),
		HandlerNoop:  target.HandlerFunc(func(context.Context, *sundialv1.Run) error { return nil }),
		// Always fails, with an error the runner retries: the job's runs
		// go through their attempts and land in the dead-letter topic.
		HandlerFlaky: target.HandlerFunc(func(_ context.Context, run *sundialv1.Run) error {
			return fmt.Errorf("dev.flaky: attempt %d failed on purpose", run.GetAttempt())
		}),
	}
}

// SampleJobs are the jobs `sundial dev` loads: a cron job every five
// seconds, a flaky job that retries and ends in the dead-letter topic, and
// an HTTP job calling the built-in echo target.
func SampleJobs(echoURL string) []*sundialv1.JobSpec {
	utc := func(s *sundialv1.Schedule) *sundialv1.Schedule {
		s.TimeZone = "UTC"
		return s
	}
	every := func(d time.Duration) *sundialv1.Schedule {
		return utc(&sundialv1.Schedule{Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(d)}}})
	}
	handler := func(name string) *sundialv1.Target {
		return &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: name}}}
	}
	return []*sundialv1.JobSpec{
		{
			Id: "dev.hello-cron", OwnerTeam: "dev", Description: "cron job every five seconds, in-process handler",
			Schedule: utc(&sundialv1.Schedule{
				Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "*/5 * * * * *"}},
				Dst: &sundialv1.DstPolicy{
					Nonexistent: sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SHIFT_FORWARD,
					Ambiguous:   sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_FIRST,
				},
			}),
			Target: handler(HandlerHello),
		},
		{
			Id: "dev.flaky", OwnerTeam: "dev", Description: "fails every attempt: retries with backoff, then the dead-letter topic",
			Schedule: every(30 * time.Second),
			Target:   handler(HandlerFlaky),
			Retry: &sundialv1.RetryPolicy{MaxAttempts: 3, InitialBackoff: durationpb.New(time.Second),
				MaxBackoff: durationpb.New(4 * time.Second), Multiplier: 2},
		},
		{
			Id: "dev.echo-http", OwnerTeam: "dev", Description: "HTTP POST to the built-in echo target every ten seconds",
			Schedule: every(10 * time.Second),
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
				Method: "POST", Url: echoURL, Body: []byte(`{"hello":"sundial"}`),
			}}},
			Timeout: durationpb.New(5 * time.Second),
		},
	}
}

// LoadSamples applies the sample jobs through the client and waits for the
// registry to accept them, then applies the sample DAG (SampleDag) and waits
// for the DAG engine. A rejection is an error naming the job and field.
func (p *Pipeline) LoadSamples(ctx context.Context) ([]*sundialv1.JobSpec, error) {
	specs := SampleJobs(p.EchoURL())
	receipts, err := p.client.ApplyAll(ctx, sundialv1.EncodingProtobuf, specs...)
	if err != nil {
		return nil, fmt.Errorf("apply sample jobs: %w", err)
	}
	statuses, err := p.client.WaitStatus(ctx, receipts...)
	if err != nil {
		return nil, fmt.Errorf("wait for the registry: %w", err)
	}
	var errs []error
	for _, st := range statuses {
		if err := client.FieldErrors(st); err != nil {
			errs = append(errs, fmt.Errorf("sample job %s rejected: %w", st.GetJobId(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return specs, err
	}
	return specs, p.ApplyDag(ctx, SampleDag())
}

// SampleDag is the DAG `sundial dev` loads: every twenty seconds, two
// extracts run side by side, then a join once both have succeeded, then a
// publish; every node is an inline job calling the hello handler.
func SampleDag() *sundialv1.DagSpec {
	node := func(id string, parents ...string) *sundialv1.DagNode {
		return &sundialv1.DagNode{Id: id, Parents: parents, Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: HandlerHello}}},
		}}}
	}
	return &sundialv1.DagSpec{
		Id: "dev.hello-dag", OwnerTeam: "dev", Description: "DAG every twenty seconds: two extracts, a join, a publish",
		Schedule: &sundialv1.Schedule{TimeZone: "UTC",
			Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(20 * time.Second)}}},
		Nodes: []*sundialv1.DagNode{
			node("extract-a"), node("extract-b"), node("join", "extract-a", "extract-b"), node("publish", "join"),
		},
	}
}

// ApplyDag produces a DAG definition to sundial.jobs through the client
// (client.Client.ApplyDag), as `sundial dag apply` does, and waits for the DAG engine's
// answer. A rejection is an error naming the fields.
func (p *Pipeline) ApplyDag(ctx context.Context, spec *sundialv1.DagSpec) error {
	r, err := p.client.ApplyDag(ctx, spec)
	if err != nil {
		return err
	}
	statuses, err := p.client.WaitStatus(ctx, r)
	if err != nil {
		return fmt.Errorf("wait for the DAG engine: %w", err)
	}
	if err := client.FieldErrors(statuses[0]); err != nil {
		return fmt.Errorf("DAG %s rejected: %w", spec.GetId(), err)
	}
	return nil
}
