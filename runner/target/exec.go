package target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Environment variables an exec target's command is given. The command gets
// these and PATH only, not the runner's environment, which may hold the
// runner's own credentials.
const (
	EnvRunID        = "SUNDIAL_RUN_ID"
	EnvJobID        = "SUNDIAL_JOB_ID"
	EnvAttempt      = "SUNDIAL_ATTEMPT"
	EnvFencingToken = "SUNDIAL_FENCING_TOKEN"
)

// DefaultExecMaxOutput is the default ExecConfig.MaxOutput.
const DefaultExecMaxOutput = 64 * 1024

// execWaitDelay is how long a finished or killed command's output pipes
// stay open for its children, which may hold them; then they are closed so
// the attempt ends.
const execWaitDelay = 2 * time.Second

// commandName is what a command may be allowed as: the characters a job's
// target.exec.command may hold.
var commandName = regexp.MustCompile(`^[A-Za-z0-9._:/-]+$`)

// ExecConfig configures the exec target.
type ExecConfig struct {
	// Allowed maps the name a job uses to the absolute path of the
	// executable. Only these run; at least one is required.
	Allowed map[string]string
	// MaxOutput is how many bytes of a command's output (standard output
	// and error together) are captured; the rest is counted and dropped.
	// The run's record keeps the last lines of what was captured, within
	// MaxOutputLines and MaxOutputBytes. Default DefaultExecMaxOutput.
	MaxOutput int
}

// Validate reports every bad field.
func (c ExecConfig) Validate() error {
	var errs []error
	if len(c.Allowed) == 0 {
		errs = append(errs, errors.New("exec config: Allowed: at least one command is required"))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Allowed)) {
		path := c.Allowed[name]
		if !commandName.MatchString(name) {
			errs = append(errs, fmt.Errorf("exec config: Allowed[%q]: name has characters outside [A-Za-z0-9._:/-]", name))
		}
		if !filepath.IsAbs(path) {
			errs = append(errs, fmt.Errorf("exec config: Allowed[%q]: %q is not an absolute path", name, path))
		}
	}
	if c.MaxOutput < 0 {
		errs = append(errs, fmt.Errorf("exec config: MaxOutput: %d is negative", c.MaxOutput))
	}
	return errors.Join(errs...)
}

// Exec runs commands an operator allowed by name.
type Exec struct {
	cfg ExecConfig
}

// NewExec returns an exec target, or the configuration's errors.
func NewExec(cfg ExecConfig) (*Exec, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxOutput == 0 {
		cfg.MaxOutput = DefaultExecMaxOutput
	}
	cfg.Allowed = maps.Clone(cfg.Allowed)
	return &Exec{cfg: cfg}, nil
}

// Execute runs the command t names with the run's payload as its standard
// input, until it exits or ctx ends (which kills it and every process of
// its process group: its children too).
func (e *Exec) Execute(ctx context.Context, req Request, t *sundialv1.ExecTarget) error {
	path, ok := e.cfg.Allowed[t.GetCommand()]
	if !ok {
		return notAllowed("command %q is not allowed on this runner (sundial runner --exec-allow)", t.GetCommand())
	}
	out := req.Output
	if out == nil {
		out = &Output{}
	}
	w := &lineWriter{out: out, limit: e.cfg.MaxOutput}
	cmd := exec.CommandContext(ctx, path)
	cmd.Stdin = bytes.NewReader(req.Run.GetPayload())
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		EnvRunID + "=" + req.Run.GetRunId(),
		EnvJobID + "=" + req.Run.GetJobId(),
		EnvAttempt + "=" + req.attempt(),
		EnvFencingToken + "=" + req.token(),
	}
	cmd.WaitDelay = execWaitDelay
	ownGroup(cmd) // a cancel or timeout kills the command's children too
	err := cmd.Run()
	w.close()
	if ctx.Err() != nil {
		return Classify(context.Cause(ctx), CodeExecExit)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		return &Error{Code: CodeExecExit, Message: t.GetCommand() + ": exit status " + strconv.Itoa(exit.ExitCode()), Retryable: true, Err: err}
	case errors.Is(err, exec.ErrWaitDelay):
		// The command exited 0 but a child kept its output open.
		return nil
	}
	return &Error{Code: CodeExecStart, Message: t.GetCommand() + ": " + err.Error(), Err: err}
}
