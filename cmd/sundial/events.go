package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func eventsCommand() *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "read sundial.events, the run and DAG run events",
		Commands: []*cli.Command{
			eventsTailCommand(),
		},
	}
}

func eventsTailCommand() *cli.Command {
	return &cli.Command{
		Name:  "tail",
		Usage: "print the events of sundial.events as they arrive, one readable line each",
		Description: `The events stay protobuf on the topic; each record names its message type in
its content-type header (application/x-protobuf; messageType=sundial.v1.RunEvent),
which this command decodes. It reads every partition without joining a
consumer group, so it takes nothing from the components that consume the topic.

Examples:
  sundial events tail                               # from now on, until Ctrl-C
  sundial events tail --job billing.nightly-invoices --from-beginning
  sundial events tail --output json -n 10 | jq .`,
		Flags: append(kafkaFlags(),
			&cli.StringFlag{Name: "job", Usage: "only the events of this job (or DAG) id", Sources: envVar("job")},
			&cli.BoolFlag{Name: "from-beginning", Usage: "start at the oldest event the topic retains instead of the newest", Sources: envVar("from-beginning")},
			outputFlag(),
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, HideDefault: true, Usage: "stop after printing this many events (default: follow until interrupted)", Sources: envVar("count")},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			form, err := outputOf(cmd)
			if err != nil {
				return err
			}
			if cmd.Int("count") < 0 {
				return fmt.Errorf("--count %d: must not be negative", cmd.Int("count"))
			}
			if cmd.Args().Len() > 0 {
				return fmt.Errorf("unexpected arguments %v: name the job with --job", cmd.Args().Slice())
			}
			brokers := cmd.StringSlice("kafka-brokers")
			if len(brokers) == 0 {
				return errors.New("--kafka-brokers: required (or SUNDIAL_KAFKA_BROKERS)")
			}
			start := kgo.NewOffset().AtEnd()
			if cmd.Bool("from-beginning") {
				start = kgo.NewOffset().AtStart()
			}
			names := topics.Names{Prefix: cmd.String("topic-prefix")}
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(names.Events()), kgo.ConsumeResetOffset(start))
			if err != nil {
				return fmt.Errorf("kafka: %w", err)
			}
			defer cl.Close()
			return tailEvents(ctx, cl, emitter{w: cmd.Root().Writer, form: form}, cmd.String("job"), cmd.Int("count"))
		},
	}
}

// tailEvents prints the events polled from cl until ctx ends or count
// events (when positive) are printed.
func tailEvents(ctx context.Context, cl *kgo.Client, out emitter, job string, count int) error {
	printed := 0
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil //nolint:nilerr // interrupted: the normal end of a tail, not a failure
		}
		var fetchErr error
		fs.EachError(func(topic string, p int32, err error) {
			fetchErr = errors.Join(fetchErr, fmt.Errorf("read %s partition %d: %w", topic, p, err))
		})
		if fetchErr != nil {
			return fetchErr
		}
		for it := fs.RecordIter(); !it.Done(); {
			rec := it.Next()
			if job != "" && string(rec.Key) != job {
				continue
			}
			if err := printEvent(out, rec); err != nil {
				return err
			}
			printed++
			if count > 0 && printed == count {
				return nil
			}
		}
	}
}

// printEvent writes the event of rec in out's form: a line of text, or
// the event as JSON or YAML. A record that does not decode is said in a
// line naming its place.
func printEvent(out emitter, rec *kgo.Record) error {
	m, err := decodeEvent(rec)
	if err == nil && out.structured() {
		return out.emit(m)
	}
	line, err := formatEvent(rec, false)
	if err != nil {
		line = fmt.Sprintf("partition %d offset %d: %v", rec.Partition, rec.Offset, err)
	}
	_, err = fmt.Fprintln(out.w, line)
	return err
}

// decodeEvent decodes the event of rec: the message type of its
// content-type header, else its kind header (records written before the
// message type was named), else a RunEvent.
func decodeEvent(rec *kgo.Record) (proto.Message, error) {
	var ct, kind string
	for _, h := range rec.Headers {
		switch strings.ToLower(h.Key) {
		case sundialv1.HeaderContentType:
			ct = string(h.Value)
		case sundialv1.HeaderKind:
			kind = string(h.Value)
		}
	}
	var m proto.Message = &sundialv1.RunEvent{}
	switch mt := sundialv1.MessageType(ct); {
	case mt == "sundial.v1.DagRunEvent", mt == "" && kind == sundialv1.KindDagRunEvent:
		m = &sundialv1.DagRunEvent{}
	case mt != "" && mt != "sundial.v1.RunEvent":
		return nil, fmt.Errorf("message type %s: not an event", mt)
	}
	if err := sundialv1.Decode(ct, rec.Value, m); err != nil {
		return nil, err
	}
	return m, nil
}

// formatEvent is one line for rec: protojson, or the event's time, state,
// ids and what went wrong.
func formatEvent(rec *kgo.Record, asJSON bool) (string, error) {
	m, err := decodeEvent(rec)
	if err != nil {
		return "", err
	}
	if asJSON {
		b, err := protojson.Marshal(m)
		return string(b), err
	}
	var b strings.Builder
	switch ev := m.(type) {
	case *sundialv1.RunEvent:
		fmt.Fprintf(&b, "%s  %-9s  job %s  run %s  attempt %d", stamp(ev.GetTime().AsTime()),
			strings.TrimPrefix(ev.GetState().String(), "RUN_STATE_"), ev.GetJobId(), ev.GetRunId(), ev.GetAttempt())
		if ev.GetRunnerId() != "" {
			fmt.Fprintf(&b, "  runner %s", ev.GetRunnerId())
		}
		if ev.GetDuration() != nil {
			fmt.Fprintf(&b, "  took %s", ev.GetDuration().AsDuration())
		}
		if ev.GetDagRunId() != "" {
			fmt.Fprintf(&b, "  dag run %s node %s", ev.GetDagRunId(), ev.GetDagNodeId())
		}
		if ev.GetReason() != "" {
			fmt.Fprintf(&b, "  reason %s", ev.GetReason())
		}
		if e := ev.GetError(); e != nil {
			fmt.Fprintf(&b, "  error %s: %s", e.GetCode(), e.GetMessage())
		}
	case *sundialv1.DagRunEvent:
		fmt.Fprintf(&b, "%s  %-9s  dag %s  dag run %s", stamp(ev.GetTime().AsTime()),
			strings.TrimPrefix(ev.GetState().String(), "DAG_STATE_"), ev.GetDagId(), ev.GetDagRunId())
		if ev.GetNodeId() != "" {
			fmt.Fprintf(&b, "  node %s", ev.GetNodeId())
		}
		if ev.GetRunId() != "" {
			fmt.Fprintf(&b, "  run %s", ev.GetRunId())
		}
		if ev.GetReason() != "" {
			fmt.Fprintf(&b, "  reason %s", ev.GetReason())
		}
	}
	return b.String(), nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
