package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func jobsApplyCommand() *cli.Command {
	return &cli.Command{
		Name:  "apply",
		Usage: "produce job definitions (files, a directory or standard input; JSON or YAML) to sundial.jobs and wait for every answer",
		Description: `Definitions are read as they come, validated with the registry's own rules,
produced without waiting for each other and answered by the registry on
sundial.jobs.status. An invalid definition is reported REJECTED with every
field at fault and is not produced; the others go on. A directory is read
recursively (*.json, *.jsonl, *.yaml, *.yml, in name order). A file or
standard input may hold a JSON array, JSON objects one after the other, or
YAML documents separated by "---" (each a definition or a list of them).

While it works, progress goes to standard error: a bar on a terminal, a
line every --progress-every otherwise. At the end it prints a summary
(created, updated, unchanged, stale, rejected) and each rejection with its
fields. The exit code is 1 when any definition was rejected or not answered.

With --api-url the definitions go through the control-plane API (ApplyJob,
one after the other), which checks the caller's team and role; without, they
are produced straight to Kafka, for an installation that runs no API server.

Examples:
  sundial jobs apply -f proto/sundial/v1/testdata/jobspec/cron-http.json
  sundial jobs apply -f jobs/            # every definition under jobs/
  generate-jobs | sundial jobs apply -f - --each=false`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "a file, a directory, or - for standard input", Sources: envVar("file")},
			&cli.BoolFlag{Name: "wait", Value: true, Usage: "wait for the registry's answers; --wait=false only produces", Sources: envVar("wait")},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up when nothing was produced or answered for this long", Sources: envVar("timeout")},
			&cli.BoolFlag{Name: "each", Value: true, Usage: "print a line for every definition; --each=false prints the rejections and the summary only", Sources: envVar("each")},
			&cli.DurationFlag{Name: "progress-every", Value: 5 * time.Second, Usage: "interval of the progress lines when standard error is not a terminal", Sources: envVar("progress-every")},
			&cli.BoolFlag{Name: "dry-run", Usage: "produce nothing: print for each definition the field diff against the stored one, its next fire times and the load it adds to its shard in the next hour (reads Cassandra)", Sources: envVar("dry-run")},
			teamFlag(),
		}, slices.Concat(kafkaFlags(), cassandraStoreFlags(), apiFlags())...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			path := cmd.String("file")
			if path == "" {
				return errors.New("--file: required (a file, a directory, or - for standard input)")
			}
			if cmd.Duration("timeout") <= 0 {
				return fmt.Errorf("--timeout %s: must be positive", cmd.Duration("timeout"))
			}
			if cmd.Bool("dry-run") {
				return applyDryRun(ctx, cmd, path)
			}
			a := &applyRun{cmd: cmd, out: cmd.Root().Writer, errOut: cmd.Root().ErrWriter, start: time.Now()}
			if api, ok, err := apiConfig(cmd); ok || err != nil {
				if err != nil {
					return err
				}
				return a.applyThroughAPI(ctx, apiv1connect.NewJobServiceClient(api.client, api.url, api.options()...), path)
			}
			c, kopts, err := newClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			// A definition that fails validation is reported whatever Kafka
			// says: Kafka's refusal ends the run only once a definition is
			// to be produced, and the input is still read to its end.
			readCtx := ctx
			return guardKafkaOnceNeeded(ctx, kopts, func(ctx context.Context, need func()) error { return a.run(ctx, readCtx, c, path, need) })
		},
	}
}

// applyRun is one `jobs apply`: its input, its counts and its output.
type applyRun struct {
	cmd         *cli.Command
	out, errOut io.Writer
	start       time.Time

	mu sync.Mutex
	// unreadable are the definitions that did not decode, and those read
	// and refused by validation here (invalid of them), as rejections.
	unreadable []string
	invalid    int
	// unsent are the valid definitions left unproduced because Kafka
	// refused.
	unsent   []string
	read     int
	produced int
	answered int
	last     time.Time // of the last produce or answer
}

// run applies the definitions of path; it calls needKafka before the first
// definition that passes validation goes to the client. When Kafka refused
// (ctx ended, readCtx did not), the rest of the input is still read and
// validated, so every invalid definition is reported however far producing
// got.
func (a *applyRun) run(ctx, readCtx context.Context, c *client.Client, path string, needKafka func()) error {
	refused := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.touch()
	stopWatch := a.watchdog(ctx, cancel, a.cmd.Duration("timeout"))
	defer stopWatch()
	stopProgress := a.progress(ctx)

	limits := c.Limits()
	next, stopReading := iter.Pull(a.specs(readCtx, path))
	defer stopReading()
	var untaken *sundialv1.JobSpec // read, then left when producing stopped
	specs := func(yield func(*sundialv1.JobSpec) bool) {
		for {
			spec, ok := next()
			if !ok || ctx.Err() != nil {
				untaken = spec
				return
			}
			if !yield(spec) {
				untaken = spec
				return
			}
		}
	}
	// validateRest reports the invalid definitions that producing did not
	// reach because Kafka refused.
	validateRest := func() {
		if refused.Err() == nil || readCtx.Err() != nil {
			return
		}
		for spec := untaken; ; {
			if spec != nil {
				if errs := limits.ValidateSpec(spec); len(errs) > 0 {
					a.rejectInvalid(spec, errs)
				} else {
					a.mu.Lock()
					a.unsent = append(a.unsent, spec.GetId())
					a.mu.Unlock()
				}
			}
			var ok bool
			if spec, ok = next(); !ok {
				return
			}
		}
	}
	if !a.cmd.Bool("wait") {
		err := a.produceOnly(ctx, c, specs, needKafka)
		validateRest()
		stopProgress()
		return a.finish(client.ApplySummary{}, err, false)
	}
	toApply := func(yield func(*sundialv1.JobSpec) bool) {
		for spec := range specs {
			// ApplyMany validates again and reports the invalid ones; this
			// only finds the first definition it will produce.
			if len(limits.ValidateSpec(spec)) == 0 {
				needKafka()
			}
			if !yield(spec) {
				return
			}
		}
	}
	sum, err := c.ApplyMany(ctx, toApply, client.ApplyOptions{
		Encoding: sundialv1.EncodingJSON, // answers in JSON, as the input
		OnProduced: func(client.Receipt) {
			a.mu.Lock()
			a.produced++
			a.last = time.Now()
			a.mu.Unlock()
		},
		OnResult: func(r client.ApplyResult) {
			a.mu.Lock()
			a.answered++
			a.last = time.Now()
			a.mu.Unlock()
			a.printResult(r)
		},
	})
	validateRest()
	stopProgress()
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	return a.finish(sum, err, true)
}

// specs yields the definitions of path; those that do not decode are kept
// as rejections.
func (a *applyRun) specs(ctx context.Context, path string) iter.Seq[*sundialv1.JobSpec] {
	return func(yield func(*sundialv1.JobSpec) bool) {
		for name, r := range a.sources(path) {
			for spec, err := range client.DecodeSpecs(r) {
				if ctx.Err() != nil {
					_ = r.Close()
					return
				}
				if err != nil {
					a.mu.Lock()
					a.unreadable = append(a.unreadable, fmt.Sprintf("%s: %v", name, err))
					a.mu.Unlock()
					continue
				}
				a.mu.Lock()
				a.read++
				a.mu.Unlock()
				if !yield(spec) {
					_ = r.Close()
					return
				}
			}
			_ = r.Close()
		}
	}
}

// definitionFile reports whether a file found in a directory is read.
func definitionFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json", ".jsonl", ".yaml", ".yml":
		return true
	}
	return false
}

// sources yields each input by name: standard input, one file, or the
// definition files under a directory in name order. One that cannot be
// opened is kept as a rejection.
func (a *applyRun) sources(path string) iter.Seq2[string, io.ReadCloser] {
	return func(yield func(string, io.ReadCloser) bool) {
		if path == "-" {
			r := a.cmd.Root().Reader
			if r == nil {
				r = os.Stdin
			}
			yield("standard input", io.NopCloser(r))
			return
		}
		var files []string
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (p == path || definitionFile(p)) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			a.reject(fmt.Sprintf("--file: %v", err))
			return
		}
		for _, f := range files {
			r, err := os.Open(f)
			if err != nil {
				a.reject(fmt.Sprintf("--file: %v", err))
				continue
			}
			if !yield(f, r) {
				return
			}
		}
	}
}

func (a *applyRun) reject(msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unreadable = append(a.unreadable, msg)
}

// rejectInvalid keeps spec, refused by validation with errs, as a rejection.
func (a *applyRun) rejectInvalid(spec *sundialv1.JobSpec, errs []jobspec.FieldError) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\tREJECTED", spec.GetId())
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Field, e.Reason)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unreadable = append(a.unreadable, b.String())
	a.invalid++
}

// produceOnly produces without waiting for answers (--wait=false), in
// chunks, printing where each definition went.
func (a *applyRun) produceOnly(ctx context.Context, c *client.Client, specs iter.Seq[*sundialv1.JobSpec], needKafka func()) error {
	const chunk = 500
	var batch []*sundialv1.JobSpec
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		receipts, err := c.ApplyAll(ctx, sundialv1.EncodingJSON, batch...)
		batch = batch[:0]
		for _, r := range receipts {
			if r.Topic == "" {
				continue
			}
			a.mu.Lock()
			a.produced++
			a.last = time.Now()
			a.mu.Unlock()
			if a.cmd.Bool("each") {
				fmt.Fprintf(a.out, "%s\tproduced to %s[%d]@%d\n", r.ID, r.Topic, r.Partition, r.Offset)
			}
		}
		return err
	}
	limits := c.Limits()
	for spec := range specs {
		if errs := limits.ValidateSpec(spec); len(errs) > 0 {
			a.rejectInvalid(spec, errs)
			continue
		}
		needKafka()
		if batch = append(batch, spec); len(batch) == chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func (a *applyRun) printResult(r client.ApplyResult) {
	st := r.Status
	rejected := st.GetOutcome() == sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED
	if r.Err != nil || (!a.cmd.Bool("each") && !rejected) {
		return // failures are listed at the end
	}
	line := fmt.Sprintf("%s\t%s", r.ID, outcomeName(st.GetOutcome()))
	if next := st.GetNextDueTime(); next != nil {
		line += "\tnext due " + next.AsTime().Format(time.RFC3339Nano)
	}
	fmt.Fprintln(a.out, line)
	for _, e := range st.GetErrors() {
		fmt.Fprintf(a.out, "  %s: %s\n", e.GetField(), e.GetReason())
	}
}

// finish prints the unreadable definitions, the failures and the summary,
// and returns the command's error.
func (a *applyRun) finish(sum client.ApplySummary, err error, waited bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range a.unreadable {
		fmt.Fprintf(a.out, "%s\n", u)
	}
	for _, f := range sum.Failures {
		fmt.Fprintf(a.out, "%s\tNOT PRODUCED\t%v\n", f.ID, f.Err)
	}
	for _, id := range a.unsent {
		fmt.Fprintf(a.out, "%s\tNOT PRODUCED\tKafka refused the connection\n", id)
	}
	total := a.read + len(a.unreadable) - a.invalid
	elapsed := time.Since(a.start)
	rejected := sum.Rejected + len(a.unreadable)
	if waited {
		fmt.Fprintf(a.out, "%d definitions in %s (%.0f/s): %d created, %d updated, %d unchanged, %d stale, %d rejected",
			total, elapsed.Round(time.Millisecond), float64(sum.Answered)/max(elapsed.Seconds(), 1e-3),
			sum.Created, sum.Updated, sum.Unchanged, sum.Stale, rejected)
		if failed := sum.Failed + len(a.unsent); failed > 0 {
			fmt.Fprintf(a.out, ", %d not produced", failed)
		}
		if missing := sum.Produced - sum.Answered; missing > 0 {
			fmt.Fprintf(a.out, ", %d not answered", missing)
		}
		fmt.Fprintln(a.out)
	} else {
		fmt.Fprintf(a.out, "%d definitions produced in %s, %d rejected\n", a.produced, elapsed.Round(time.Millisecond), rejected)
	}
	if err != nil {
		if waited {
			return fmt.Errorf("is the registry running? %w", err)
		}
		return err
	}
	if rejected > 0 {
		return fmt.Errorf("%d of %d definitions rejected", rejected, total)
	}
	return nil
}

func (a *applyRun) touch() {
	a.mu.Lock()
	a.last = time.Now()
	a.mu.Unlock()
}

// watchdog cancels ctx when nothing was produced or answered for timeout.
func (a *applyRun) watchdog(ctx context.Context, cancel context.CancelCauseFunc, timeout time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(min(timeout/4, time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			a.mu.Lock()
			idle := time.Since(a.last)
			a.mu.Unlock()
			if idle >= timeout {
				cancel(fmt.Errorf("nothing produced or answered for %s (--timeout)", timeout))
				return
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// progress reports on standard error until stop is called: a bar redrawn
// in place on a terminal, a line every --progress-every otherwise, and the
// final state when stopped.
func (a *applyRun) progress(ctx context.Context) (stop func()) {
	terminal := isTerminal(a.errOut)
	every := a.cmd.Duration("progress-every")
	if terminal {
		every = 200 * time.Millisecond
	}
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done: // the final state, so even a short run reports once
				a.draw(terminal)
				if terminal {
					fmt.Fprintln(a.errOut)
				}
				return
			case <-ctx.Done():
				return
			case <-t.C:
				a.draw(terminal)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// draw writes one progress report. The bar shows answered of produced: the
// total is not known while the input streams.
func (a *applyRun) draw(terminal bool) {
	a.mu.Lock()
	read, produced, answered := a.read, a.produced, a.answered
	a.mu.Unlock()
	elapsed := time.Since(a.start)
	rate := float64(answered) / max(elapsed.Seconds(), 1e-3)
	if !terminal {
		fmt.Fprintf(a.errOut, "%s  read %d  produced %d  answered %d  %.0f/s\n", elapsed.Round(time.Second), read, produced, answered, rate)
		return
	}
	const width = 30
	filled := 0
	if produced > 0 {
		filled = min(width, answered*width/produced)
	}
	fmt.Fprintf(a.errOut, "\r[%s%s] answered %d of %d produced (%d read)  %.0f/s  %s ",
		strings.Repeat("#", filled), strings.Repeat("-", width-filled), answered, produced, read, rate, elapsed.Round(time.Second))
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
