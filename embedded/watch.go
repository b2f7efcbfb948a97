package embedded

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Watch prints every run event, DAG-run event and dead letter as it
// happens, one line each, until ctx ends. It reads from the start of the topics, so nothing that
// happened before it was called is missed.
func (p *Pipeline) Watch(ctx context.Context, w io.Writer) error {
	names := p.names()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Brokers()...),
		kgo.ConsumeTopics(names.Events(), names.DLQ()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fetches.Errors() {
			fmt.Fprintf(w, "watch: %s[%d]: %v\n", fe.Topic, fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			fmt.Fprintln(w, describe(rec, names.DLQ()))
		})
	}
}

// describe renders one record of sundial.events or sundial.dlq.
func describe(rec *kgo.Record, dlqTopic string) string {
	if rec.Topic == dlqTopic {
		var dl sundialv1.DeadLetter
		if err := sundialv1.Decode(topics.Header(rec, sundialv1.HeaderContentType), rec.Value, &dl); err != nil {
			return fmt.Sprintf("dead letter (undecodable: %v)", err)
		}
		return fmt.Sprintf("%s  %-16s %-10s run=%s attempts=%d error=%q", stamp(dl.GetDeadAt().AsTime()), dl.GetRun().GetJobId(), "DLQ",
			dl.GetRun().GetRunId(), dl.GetAttempts(), dl.GetLastError().GetMessage())
	}
	if kind(rec) == sundialv1.KindDagRunEvent {
		return describeDag(rec)
	}
	var ev sundialv1.RunEvent
	if err := sundialv1.Decode(topics.Header(rec, sundialv1.HeaderContentType), rec.Value, &ev); err != nil {
		return fmt.Sprintf("event (undecodable: %v)", err)
	}
	state := strings.TrimPrefix(ev.GetState().String(), "RUN_STATE_")
	line := fmt.Sprintf("%s  %-16s %-10s run=%s attempt=%d", stamp(ev.GetTime().AsTime()), ev.GetJobId(), state, ev.GetRunId(), ev.GetAttempt())
	// The start: STARTED's time, or the started_time an outcome carries
	// when the run ended before its runner produced STARTED.
	switch {
	case ev.GetDueTime() == nil:
	case ev.GetState() == sundialv1.RunState_RUN_STATE_STARTED:
		line += fmt.Sprintf(" late=%s", ev.GetTime().AsTime().Sub(ev.GetDueTime().AsTime()).Round(time.Millisecond))
	case ev.GetStartedTime() != nil:
		line += fmt.Sprintf(" late=%s", ev.GetStartedTime().AsTime().Sub(ev.GetDueTime().AsTime()).Round(time.Millisecond))
	}
	if d := ev.GetDuration(); d != nil {
		line += fmt.Sprintf(" took=%s", d.AsDuration().Round(time.Microsecond))
	}
	if msg := ev.GetError().GetMessage(); msg != "" {
		line += fmt.Sprintf(" error=%q", msg)
	}
	if t := ev.GetNextAttemptDueTime(); t != nil {
		line += " next=" + stamp(t.AsTime())
	}
	return line
}

// describeDag renders a DagRunEvent: the DAG run's own state changes, and
// those of its nodes (with the node's run id).
func describeDag(rec *kgo.Record) string {
	var ev sundialv1.DagRunEvent
	if err := sundialv1.Decode(topics.Header(rec, sundialv1.HeaderContentType), rec.Value, &ev); err != nil {
		return fmt.Sprintf("dag run event (undecodable: %v)", err)
	}
	state := strings.TrimPrefix(ev.GetState().String(), "DAG_STATE_")
	line := fmt.Sprintf("%s  %-16s %-10s dag_run=%s", stamp(ev.GetTime().AsTime()), ev.GetDagId(), state, ev.GetDagRunId())
	if ev.GetNodeId() != "" {
		line += fmt.Sprintf(" node=%s run=%s", ev.GetNodeId(), ev.GetRunId())
	}
	if ev.GetReason() != "" {
		line += fmt.Sprintf(" reason=%q", ev.GetReason())
	}
	return line
}

// kind is a record's sundial-kind header, empty without one.
func kind(rec *kgo.Record) string {
	for _, h := range rec.Headers {
		if h.Key == sundialv1.HeaderKind {
			return string(h.Value)
		}
	}
	return ""
}

func stamp(t time.Time) string { return t.Local().Format("15:04:05.000") }
