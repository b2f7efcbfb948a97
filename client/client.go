package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/internal/tracing"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Config configures a Client.
type Config struct {
	// Kafka are the options of every Kafka client of the client: the seed brokers
	// (kgo.SeedBrokers) and the connection's TLS and SASL, as
	// connect.Kafka.Options builds them from the command's flags. Required.
	Kafka []kgo.Opt
	// Topics names Sundial's topics (set Prefix when the installation uses
	// one).
	Topics topics.Names
	// Limits are the registry's limits, for local validation. Default:
	// jobspec.Limits' defaults.
	Limits jobspec.Limits
	// Team, if set, is the team the client produces definitions and
	// deletes for: they go to its topic, sundial.jobs.<team>, which Kafka
	// ACLs may reserve to it, and must name it as owner_team.
	Team string
	// ByOwner, when Team is empty, produces each definition to the topic of
	// its owner_team, sundial.jobs.<owner_team>, and each delete to the
	// topic of the team WithTeam put in the call's context or, without
	// one, of the team the id starts with (<owner_team>.<name>). A client
	// acting for several teams (the API) sets it. Without Team or ByOwner
	// the client produces to the shared sundial.jobs, which a registry
	// reads only with --jobs-shared-topic=true.
	ByOwner bool
	// Logger; nil discards.
	Logger *slog.Logger
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var errs []error
	if len(c.Kafka) == 0 {
		errs = append(errs, errors.New("client config: kafka: required (at least kgo.SeedBrokers)"))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("client config: %w", err))
	}
	if c.Team != "" {
		if err := topics.ValidTeam(c.Team); err != nil {
			errs = append(errs, fmt.Errorf("client config: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ErrNoTeamTopic is returned (wrapped) when a team's topic
// sundial.jobs.<team> does not exist: the team was never created (`sundial
// teams create`) or `sundial migrate` has not run since the upgrade.
// Retrying does not help.
var ErrNoTeamTopic = errors.New("the team's topic does not exist")

type teamKey struct{}

// WithTeam returns ctx naming the team whose topic a ByOwner client
// produces the deletes of the call to (the stored owner of the job).
func WithTeam(ctx context.Context, team string) context.Context {
	return context.WithValue(ctx, teamKey{}, team)
}

// TeamOf returns the team WithTeam put in ctx, or "".
func TeamOf(ctx context.Context) string {
	team, _ := ctx.Value(teamKey{}).(string)
	return team
}

// TopicFor is the topic a definition or delete of team goes to: the
// client's Team's, else (ByOwner) team's, else the shared sundial.jobs.
// team is the definition's owner_team or, for a delete, the stored owner.
func (c *Client) TopicFor(team string) (string, error) {
	switch {
	case c.cfg.Team != "":
		return c.cfg.Topics.TeamJobs(c.cfg.Team), nil
	case !c.cfg.ByOwner:
		return c.cfg.Topics.Jobs(), nil
	}
	if err := topics.ValidTeam(team); err != nil {
		return "", fmt.Errorf("owner_team: %w: it names the topic sundial.jobs.<team> the definition goes to", err)
	}
	return c.cfg.Topics.TeamJobs(team), nil
}

// specTopic is the topic spec goes to.
func (c *Client) specTopic(spec *sundialv1.JobSpec) (string, error) {
	return c.TopicFor(spec.GetOwnerTeam())
}

// deleteTopic is the topic a delete of id goes to: that of the team in
// ctx, else of the team id starts with.
func (c *Client) deleteTopic(ctx context.Context, id string) (string, error) {
	team := TeamOf(ctx)
	if team == "" {
		team, _, _ = strings.Cut(id, ".")
	}
	return c.TopicFor(team)
}

// definitionsTopic reports whether topic carries definitions this client
// may have produced: sundial.jobs or a team's.
func (c *Client) definitionsTopic(topic string) bool {
	if _, ok := c.cfg.Topics.TeamOf(topic); ok {
		return true
	}
	return topic == c.cfg.Topics.Jobs()
}

// Client produces job definitions, deletes and triggers, and reads the
// registry's answers.
type Client struct {
	cfg      Config
	producer *kgo.Client
}

// New connects lazily: the first produce dials the brokers.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = deps.Logger(cfg.Logger)
	opts := slices.Clone(cfg.Kafka)
	producer, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client: kafka: %w", err)
	}
	return &Client{cfg: cfg, producer: producer}, nil
}

// Close flushes nothing (every produce is synchronous) and closes the
// connections.
func (c *Client) Close() { c.producer.Close() }

// Receipt names a record the client produced.
type Receipt struct {
	// ID is the record key: the job id.
	ID        string
	Topic     string
	Partition int32
	Offset    int64
	// Revision is the revision the record's definition gets in the store
	// (topics.Names.Revision): its offset, after every shared-topic
	// revision when Topic is a team's.
	Revision int64
	// Timestamp is the record's timestamp, the instant immediate and delay
	// schedules count from.
	Timestamp time.Time
}

// receiptOf is the receipt of rec, an acknowledged record of id: where it
// went, and the revision its definition gets (topics.Names.Revision).
func receiptOf(names topics.Names, id string, rec *kgo.Record) Receipt {
	return Receipt{ID: id, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Revision: names.Revision(rec.Topic, rec.Offset), Timestamp: rec.Timestamp}
}

// Apply validates spec and produces it to sundial.jobs as protobuf. An
// invalid spec is not produced: the error is a *jobspec.ValidationError.
func (c *Client) Apply(ctx context.Context, spec *sundialv1.JobSpec) (Receipt, error) {
	rs, err := c.ApplyAll(ctx, sundialv1.EncodingProtobuf, spec)
	if err != nil {
		return Receipt{}, err
	}
	return rs[0], nil
}

// ApplyAll validates every spec and, only if all are valid, produces them in
// enc, in order. The error of invalid specs joins one
// *jobspec.ValidationError per invalid spec.
func (c *Client) ApplyAll(ctx context.Context, enc sundialv1.Encoding, specs ...*sundialv1.JobSpec) ([]Receipt, error) {
	var invalid []error
	for _, spec := range specs {
		if errs := c.cfg.Limits.ValidateSpec(spec); len(errs) > 0 {
			invalid = append(invalid, &jobspec.ValidationError{JobID: spec.GetId(), Errors: errs})
		}
	}
	if len(invalid) > 0 {
		return nil, errors.Join(invalid...)
	}
	recs := make([]*kgo.Record, len(specs))
	for i, spec := range specs {
		value, err := enc.Marshal(spec)
		if err != nil {
			return nil, fmt.Errorf("apply job %q: %w", spec.GetId(), err)
		}
		topic, err := c.specTopic(spec)
		if err != nil {
			return nil, fmt.Errorf("apply job %q: %w", spec.GetId(), err)
		}
		recs[i] = &kgo.Record{
			Topic:   topic,
			Key:     []byte(spec.GetId()),
			Value:   value,
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(enc.String())}},
		}
	}
	return c.produce(ctx, "apply", recs)
}

// ApplyJSON reads one JobSpec or a JSON array of them (protojson, unknown
// fields refused), validates them all and produces them as JSON, so the
// registry answers in JSON too.
func (c *Client) ApplyJSON(ctx context.Context, data []byte) ([]Receipt, error) {
	specs, err := ParseJSON(data)
	if err != nil {
		return nil, err
	}
	return c.ApplyAll(ctx, sundialv1.EncodingJSON, specs...)
}

// ParseJSON reads one JobSpec or a JSON array of them. Unknown fields are
// errors, naming the element of the array.
func ParseJSON(data []byte) ([]*sundialv1.JobSpec, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("no job definition: the input is empty")
	}
	if trimmed[0] != '[' {
		spec := &sundialv1.JobSpec{}
		if err := sundialv1.EncodingJSON.Unmarshal(trimmed, spec); err != nil {
			return nil, err
		}
		return []*sundialv1.JobSpec{spec}, nil
	}
	// protojson decodes messages, not arrays: split the array with
	// encoding/json's scanner, then decode each element strictly.
	var raws []json.RawMessage
	if err := json.Unmarshal(trimmed, &raws); err != nil {
		return nil, fmt.Errorf("read the array of job definitions: %w", err)
	}
	if len(raws) == 0 {
		return nil, errors.New("no job definition: the array is empty")
	}
	specs := make([]*sundialv1.JobSpec, len(raws))
	var errs []error
	for i, raw := range raws {
		spec := &sundialv1.JobSpec{}
		if err := (protojson.UnmarshalOptions{}).Unmarshal(raw, spec); err != nil {
			errs = append(errs, fmt.Errorf("job definition [%d]: %w", i, err))
		}
		specs[i] = spec
	}
	return specs, errors.Join(errs...)
}

// Delete produces a tombstone for the job: the registry deletes it and its
// pending run.
func (c *Client) Delete(ctx context.Context, id string) (Receipt, error) {
	if r := jobspec.CheckID(id); r != "" {
		return Receipt{}, &jobspec.ValidationError{JobID: id, Errors: []jobspec.FieldError{{Field: "id", Reason: r}}}
	}
	topic, err := c.deleteTopic(ctx, id)
	if err != nil {
		return Receipt{}, fmt.Errorf("delete %q: %w", id, err)
	}
	rs, err := c.produce(ctx, "delete", []*kgo.Record{{Topic: topic, Key: []byte(id)}})
	if err != nil {
		return Receipt{}, err
	}
	return rs[0], nil
}

// Trigger asks for one run of the job now. Sending the same idempotency key
// again (a retry after a timeout, say) starts no second run.
func (c *Client) Trigger(ctx context.Context, jobID, idempotencyKey string) (Receipt, error) {
	return c.SendTrigger(ctx, &sundialv1.Trigger{JobId: jobID, IdempotencyKey: idempotencyKey})
}

// SendTrigger produces a Trigger as given (payload override, caller,
// requested_at), after checking it as the trigger consumer does.
func (c *Client) SendTrigger(ctx context.Context, t *sundialv1.Trigger) (Receipt, error) {
	value, err := sundialv1.EncodingProtobuf.Marshal(t)
	if err != nil {
		return Receipt{}, fmt.Errorf("trigger job %q: %w", t.GetJobId(), err)
	}
	rec := &kgo.Record{
		Topic:     c.cfg.Topics.Triggers(),
		Key:       []byte(t.GetJobId()),
		Value:     value,
		Timestamp: time.Now(),
		Headers:   []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}},
	}
	maxPayload := c.cfg.Limits.MaxPayloadBytes
	if maxPayload == 0 {
		maxPayload = jobspec.DefaultMaxPayloadBytes
	}
	if _, errs := jobspec.DecodeTrigger(rec, maxPayload); len(errs) > 0 {
		return Receipt{}, &jobspec.ValidationError{JobID: t.GetJobId(), Errors: errs}
	}
	rec.Timestamp = time.Time{} // stamped by the producer
	rs, err := c.produce(ctx, "trigger", []*kgo.Record{rec})
	if err != nil {
		return Receipt{}, err
	}
	return rs[0], nil
}

// ProduceError names what failed; a missing team topic wraps
// ErrNoTeamTopic.
func ProduceError(op string, r *kgo.Record, err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("%s %q: %w: %s (create the team with `sundial teams create`, or run `sundial migrate`): %w", op, r.Key, ErrNoTeamTopic, r.Topic, err)
	}
	return fmt.Errorf("%s %q: produce to %s: %w", op, r.Key, r.Topic, err)
}

func (c *Client) produce(ctx context.Context, op string, recs []*kgo.Record) ([]Receipt, error) {
	// Results come back in completion order; receipts go in input order.
	index := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		index[r] = i
		// The caller's trace (an API request's span) continues in the
		// registry; without one the record carries no header.
		tracing.Inject(ctx, tracing.RecordCarrier{Record: r})
	}
	results := c.producer.ProduceSync(ctx, recs...)
	out := make([]Receipt, len(recs))
	var errs []error
	for _, r := range results {
		i := index[r.Record]
		if r.Err != nil {
			errs = append(errs, ProduceError(op, r.Record, r.Err))
			continue
		}
		out[i] = receiptOf(c.cfg.Topics, string(r.Record.Key), r.Record)
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	return out, nil
}
