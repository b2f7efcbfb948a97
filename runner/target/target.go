package target

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/egress"
)

// Headers the runner sets on every HTTP call.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderJobID          = "Sundial-Job-Id"
	HeaderRunID          = "Sundial-Run-Id"
	HeaderAttempt        = "Sundial-Attempt"
	HeaderFencingToken   = "Sundial-Fencing-Token"
	// HeaderShard and HeaderShardCount are set on the calls of a child run
	// of a BROADCAST or SHARDED run only: its index among the base run's
	// children, from 0, and how many there are.
	HeaderShard      = "Sundial-Shard"
	HeaderShardCount = "Sundial-Shard-Count"
)

// Record headers the runner sets on every record a Kafka target produces.
const (
	RecordHeaderIdempotencyKey = sundialv1.HeaderIdempotencyKey
	RecordHeaderJobID          = "sundial-job-id"
	RecordHeaderRunID          = "sundial-run-id"
	RecordHeaderAttempt        = "sundial-attempt"
	RecordHeaderFencingToken   = "sundial-fencing-token"
	// RecordHeaderShard and RecordHeaderShardCount are as HeaderShard and
	// HeaderShardCount.
	RecordHeaderShard      = "sundial-shard"
	RecordHeaderShardCount = "sundial-shard-count"
)

// shard returns the run's shard index and count as header values, and
// whether it is a child run that has them.
func (r Request) shard() (index, count string, ok bool) {
	if r.Run.GetBaseRunId() == "" {
		return "", "", false
	}
	return strconv.FormatUint(uint64(r.Run.GetShardIndex()), 10), strconv.FormatUint(uint64(r.Run.GetShardCount()), 10), true
}

// Request is one attempt to execute.
type Request struct {
	Run *sundialv1.Run
	// FencingToken is the token of the lease held for this attempt.
	FencingToken int64
	// Output receives what the attempt logs (an AttemptHandler's lines, an
	// exec target's output); the runner puts its lines on the attempt's
	// final event. Nil discards.
	Output *Output
}

func (r Request) body(fallback []byte) []byte {
	if len(r.Run.GetPayload()) > 0 {
		return r.Run.GetPayload()
	}
	return fallback
}

func (r Request) attempt() string { return strconv.FormatUint(uint64(r.Run.GetAttempt()), 10) }
func (r Request) token() string   { return strconv.FormatInt(r.FencingToken, 10) }

// Handler is a Go function a runner binary registers under a name, called for
// runs whose target is HandlerTarget{name}. ctx ends when the job's timeout
// passes or the lease is lost; a handler must return soon after. An error
// that is (or wraps) an *Error keeps its code and retryable flag; any other
// error is retryable with code "handler_error" (see Permanent and Fail).
type Handler interface {
	Handle(ctx context.Context, run *sundialv1.Run) error
}

// AttemptHandler is a Handler that is given the whole attempt: the run, the
// fencing token and the Output its log lines go to. Targets calls
// HandleAttempt, never Handle, on a handler that implements it. Package
// worker builds its handlers on it.
type AttemptHandler interface {
	Handler
	HandleAttempt(ctx context.Context, req Request) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, run *sundialv1.Run) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, run *sundialv1.Run) error { return f(ctx, run) }

// Targets executes runs on whichever kind of target they name.
type Targets struct {
	// HTTP executes HTTP targets; nil refuses them.
	HTTP *HTTP
	// Kafka executes Kafka targets; nil refuses them.
	Kafka *Kafka
	// Handlers are the in-process handlers by name.
	Handlers map[string]Handler
	// Remote executes the handler runs whose name is not in Handlers (a
	// worker gateway's workers); nil refuses them as unknown.
	Remote AttemptHandler
	// Exec runs the commands an operator allows; nil refuses exec targets.
	Exec *Exec
	// Egress decides the Kafka topics and commands each team may use (and
	// should be HTTP.Egress, which decides the addresses). Nil is the
	// default policy: a team's own topics (<team>.*) and no command.
	Egress *egress.Policy
}

// Execute runs one attempt. The error is nil or an *Error.
func (t *Targets) Execute(ctx context.Context, req Request) error {
	switch k := req.Run.GetTarget().GetKind().(type) {
	case *sundialv1.Target_Http:
		if t.HTTP == nil {
			return invalid("this runner has no HTTP target configured")
		}
		return t.HTTP.Execute(ctx, req, k.Http)
	case *sundialv1.Target_Kafka:
		if t.Kafka == nil {
			return invalid("this runner has no Kafka target configured")
		}
		if err := t.Egress.CheckTopic(req.Run.GetOwnerTeam(), k.Kafka.GetTopic()); err != nil {
			return refusal(err)
		}
		return t.Kafka.Execute(ctx, req, k.Kafka)
	case *sundialv1.Target_Handler:
		h, ok := t.Handlers[k.Handler.GetName()]
		if !ok && t.Remote != nil {
			h, ok = t.Remote, true
		}
		if !ok {
			return &Error{Code: CodeUnknownHandler, Message: "no handler named " + strconv.Quote(k.Handler.GetName()) + " is registered in this runner"}
		}
		return callHandler(ctx, h, req)
	case *sundialv1.Target_Exec:
		if t.Exec == nil {
			return notAllowed("this runner allows no commands (sundial runner --exec-allow)")
		}
		if err := t.Egress.CheckExec(req.Run.GetOwnerTeam(), k.Exec.GetCommand()); err != nil {
			return &Error{Code: CodeExecNotAllowed, Message: err.Error(), Err: err}
		}
		return t.Exec.Execute(ctx, req, k.Exec)
	}
	return invalid("run has no target")
}

// CodeHandlerPanic is the code of a handler that panicked: a bug, not
// retried.
const CodeHandlerPanic = "handler_panic"

func callHandler(ctx context.Context, h Handler, req Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Code: CodeHandlerPanic, Message: fmt.Sprint(p)}
		}
	}()
	if ah, ok := h.(AttemptHandler); ok {
		err = ah.HandleAttempt(ctx, req)
	} else {
		err = h.Handle(ctx, req.Run)
	}
	if err != nil {
		return Classify(err, CodeHandler)
	}
	return nil
}

// Downstream names the downstream of run for circuit breaking: "http:" and
// the lower-cased host[:port] of an HTTP target, "kafka" for a Kafka target
// (the cluster Sundial runs on), "handler:" and the name of a handler,
// "exec:" and the name of an allowed command. Empty
// when the run has no valid target.
func Downstream(run *sundialv1.Run) string {
	switch k := run.GetTarget().GetKind().(type) {
	case *sundialv1.Target_Http:
		u, err := url.Parse(k.Http.GetUrl())
		if err != nil || u.Host == "" {
			return ""
		}
		return "http:" + strings.ToLower(u.Host)
	case *sundialv1.Target_Kafka:
		return "kafka"
	case *sundialv1.Target_Handler:
		return "handler:" + k.Handler.GetName()
	case *sundialv1.Target_Exec:
		return "exec:" + k.Exec.GetCommand()
	}
	return ""
}
