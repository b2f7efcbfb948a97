package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	connectrpc "connectrpc.com/connect"
	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/operator"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// The operator actions (jobs pause and resume, trigger, runs cancel and
// retry) go
// through the control-plane API when --api-url is set, which checks the
// caller's team and role and records the action in the audit trail; and
// straight to Kafka, Cassandra and Redis otherwise, for an installation that
// runs no API server. This file is the one place that chooses: each action
// is an operations method, with one implementation per path, and the
// commands print the same lines whichever path answered.

// operations are the operator actions of the CLI.
type operations interface {
	// setPaused pauses or resumes a job; changed is false when it already
	// was.
	setPaused(ctx context.Context, id string, pause bool) (changed bool, status *sundialv1.JobStatus, err error)
	// trigger runs a job or a DAG now.
	trigger(ctx context.Context, id string, opts operator.TriggerOptions) (operator.TriggerResult, error)
	// cancel cancels a running run; with wait, it returns its terminal
	// event.
	cancel(ctx context.Context, job, runID string, wait bool) (*sundialv1.RunEvent, error)
	// retry runs a failed, timed-out or cancelled run again as a new
	// attempt.
	retry(ctx context.Context, runID string) (operator.RetryResult, error)
}

// operationsAPI are the operator actions through the API.
type operationsAPI struct {
	ops apiv1connect.OperatorServiceClient
}

// apiOperations returns the API's operations when --api-url is set; ok is
// false otherwise, and the command takes its direct path.
func apiOperations(cmd *cli.Command) (ops operations, ok bool, err error) {
	api, ok, err := apiConfig(cmd)
	if !ok || err != nil {
		return nil, ok, err
	}
	return operationsAPI{ops: apiv1connect.NewOperatorServiceClient(api.client, api.url, api.options()...)}, true, nil
}

func (a operationsAPI) setPaused(ctx context.Context, id string, pause bool) (bool, *sundialv1.JobStatus, error) {
	if pause {
		resp, err := a.ops.PauseJob(ctx, connectrpc.NewRequest(&apiv1.PauseJobRequest{JobId: id}))
		if err != nil {
			return false, nil, fmt.Errorf("pause %s: %w", id, err)
		}
		return resp.Msg.GetChanged(), resp.Msg.GetStatus(), nil
	}
	resp, err := a.ops.ResumeJob(ctx, connectrpc.NewRequest(&apiv1.ResumeJobRequest{JobId: id}))
	if err != nil {
		return false, nil, fmt.Errorf("resume %s: %w", id, err)
	}
	return resp.Msg.GetChanged(), resp.Msg.GetStatus(), nil
}

func (a operationsAPI) trigger(ctx context.Context, id string, opts operator.TriggerOptions) (operator.TriggerResult, error) {
	req := &apiv1.TriggerJobRequest{JobId: id, IdempotencyKey: opts.IdempotencyKey, Payload: opts.Payload, Wait: opts.Wait}
	if d, ok := ctx.Deadline(); ok && opts.Wait {
		req.WaitTimeout = durationpb.New(time.Until(d))
	}
	resp, err := a.ops.TriggerJob(ctx, connectrpc.NewRequest(req))
	if err != nil {
		return operator.TriggerResult{}, fmt.Errorf("trigger %s: %w", id, err)
	}
	return operator.TriggerResult{RunID: resp.Msg.GetRunId(), Event: resp.Msg.GetEvent()}, nil
}

func (a operationsAPI) cancel(ctx context.Context, _, runID string, wait bool) (*sundialv1.RunEvent, error) {
	req := &apiv1.CancelRunRequest{RunId: runID, Wait: wait}
	if d, ok := ctx.Deadline(); ok && wait {
		req.WaitTimeout = durationpb.New(time.Until(d))
	}
	resp, err := a.ops.CancelRun(ctx, connectrpc.NewRequest(req))
	if connectrpc.CodeOf(err) == connectrpc.CodeFailedPrecondition {
		return nil, fmt.Errorf("%w: %w", operator.ErrNotRunning, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", runID, err)
	}
	return resp.Msg.GetEvent(), nil
}

func (a operationsAPI) retry(ctx context.Context, runID string) (operator.RetryResult, error) {
	resp, err := a.ops.RetryRun(ctx, connectrpc.NewRequest(&apiv1.RetryRunRequest{RunId: runID}))
	switch connectrpc.CodeOf(err) {
	case connectrpc.CodeFailedPrecondition:
		return operator.RetryResult{}, fmt.Errorf("%w: %w", operator.ErrNotRetryable, err)
	case connectrpc.CodeNotFound:
		return operator.RetryResult{}, fmt.Errorf("%w: %w", operator.ErrNotFound, err)
	}
	if err != nil {
		return operator.RetryResult{}, fmt.Errorf("retry %s: %w", runID, err)
	}
	return operator.RetryResult{JobID: resp.Msg.GetJobId(), Attempt: int(resp.Msg.GetAttempt())}, nil
}

// operationsDirect are the operator actions on the backends, through one
// operator.Operator the command built for the action.
type operationsDirect struct{ op *operator.Operator }

func (d operationsDirect) setPaused(ctx context.Context, id string, pause bool) (bool, *sundialv1.JobStatus, error) {
	act := d.op.Resume
	if pause {
		act = d.op.Pause
	}
	res, err := act(ctx, id)
	return res.Changed, res.Status, err
}

func (d operationsDirect) trigger(ctx context.Context, id string, opts operator.TriggerOptions) (operator.TriggerResult, error) {
	return d.op.Trigger(ctx, id, opts)
}

func (d operationsDirect) cancel(ctx context.Context, job, runID string, wait bool) (*sundialv1.RunEvent, error) {
	res, err := d.op.Cancel(ctx, job, runID, operator.CancelOptions{Wait: wait})
	return res.Event, err
}

// applyThroughAPI applies the definitions of path with the API's
// ApplyJob, one after the other, and prints what a direct apply prints.
// The API validates, produces to the owner team's topic and waits for the
// registry's answer; a definition it refuses (another team's, a bad
// field) is a failure or a rejection of that definition only.
func (a *applyRun) applyThroughAPI(ctx context.Context, jobs apiv1connect.JobServiceClient, path string) error {
	stopProgress := a.progress(ctx)
	var sum client.ApplySummary
	for spec := range a.specs(ctx, path) {
		r := client.ApplyResult{ID: spec.GetId()}
		resp, err := jobs.ApplyJob(ctx, connectrpc.NewRequest(&apiv1.ApplyJobRequest{Spec: spec}))
		if err != nil {
			r.Err = err
		} else {
			r.Status = resp.Msg.GetStatus()
		}
		a.mu.Lock()
		a.produced++
		a.answered++
		a.last = time.Now()
		a.mu.Unlock()
		tally(&sum, r)
		a.printResult(r)
	}
	stopProgress()
	return a.finish(sum, ctx.Err(), true)
}

// tally counts r in sum as client.ApplyMany counts its results.
func tally(sum *client.ApplySummary, r client.ApplyResult) {
	sum.Read++
	if r.Err != nil {
		sum.Failed++
		sum.Failures = append(sum.Failures, r)
		return
	}
	sum.Produced++
	sum.Answered++
	switch r.Status.GetOutcome() {
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED:
		sum.Created++
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED:
		sum.Updated++
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED:
		sum.Unchanged++
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE:
		sum.Stale++
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED:
		sum.Rejected++
		sum.Rejections = append(sum.Rejections, r)
	}
}

// deleteThroughAPI deletes ids with the API's DeleteJob and prints each
// answer as a direct delete does.
func deleteThroughAPI(ctx context.Context, cmd *cli.Command, api apiConn, ids []string) error {
	jobs := apiv1connect.NewJobServiceClient(api.client, api.url, api.options()...)
	out := cmd.Root().Writer
	var errs []error
	for _, id := range ids {
		resp, err := jobs.DeleteJob(ctx, connectrpc.NewRequest(&apiv1.DeleteJobRequest{Id: id}))
		if err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", id, err))
			continue
		}
		fmt.Fprintf(out, "%s\t%s\n", id, outcomeName(resp.Msg.GetStatus().GetOutcome()))
	}
	return errors.Join(errs...)
}

func (d operationsDirect) retry(ctx context.Context, runID string) (operator.RetryResult, error) {
	return d.op.Retry(ctx, runID)
}
