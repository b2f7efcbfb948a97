package jobspec_test

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// validSpec returns a definition that passes, with every optional part set,
// so each case can break exactly one thing.
func validSpec() *sundialv1.JobSpec {
	return &sundialv1.JobSpec{
		Id:        "billing.nightly-invoices",
		OwnerTeam: "billing",
		Labels:    map[string]string{"env": "prod"},
		Payload:   []byte(`{"period":"previous_day"}`),
		Schedule: &sundialv1.Schedule{
			Kind:     &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "30 2 * * *"}},
			TimeZone: "Europe/Berlin",
			Dst: &sundialv1.DstPolicy{
				Nonexistent: sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SHIFT_FORWARD,
				Ambiguous:   sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_FIRST,
			},
			MisfirePolicy: sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ONCE,
			CatchUpWindow: durationpb.New(6 * time.Hour),
		},
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
			Method:  "POST",
			Url:     "https://invoicing.internal.example/v1/batches",
			Headers: map[string]string{"Content-Type": "application/json"},
		}}},
		Priority: sundialv1.Priority_PRIORITY_HIGH,
		Retry: &sundialv1.RetryPolicy{
			MaxAttempts:        5,
			InitialBackoff:     durationpb.New(2 * time.Second),
			MaxBackoff:         durationpb.New(10 * time.Minute),
			Multiplier:         2.5,
			NonRetryableErrors: []string{"http_409", "http_422"},
		},
		Timeout:          durationpb.New(2 * time.Minute),
		ConcurrencyLimit: 1,
		OverlapPolicy:    sundialv1.OverlapPolicy_OVERLAP_POLICY_QUEUE,
		QueueDelay:       durationpb.New(30 * time.Second),
		Revision:         proto.Uint64(42),
		Description:      "Sends the invoices.",
	}
}

func TestValidSpecsPass(t *testing.T) {
	t.Parallel()
	assert.Empty(t, jobspec.Validate(validSpec()))

	// Every example of the documentation is valid.
	files, err := filepath.Glob("../proto/sundial/v1/testdata/jobspec/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		spec := &sundialv1.JobSpec{}
		require.NoError(t, sundialv1.EncodingJSON.Unmarshal(data, spec), f)
		assert.Empty(t, jobspec.Validate(spec), f)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("a", n) }
	labels := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m["k"+strings.Repeat("x", i)] = "v"
		}
		return m
	}
	httpTarget := func(h *sundialv1.HttpTarget) *sundialv1.Target {
		return &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: h}}
	}
	kafkaTarget := func(k *sundialv1.KafkaTarget) *sundialv1.Target {
		return &sundialv1.Target{Kind: &sundialv1.Target_Kafka{Kafka: k}}
	}
	handler := func(name string) *sundialv1.Target {
		return &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: name}}}
	}
	utcSchedule := func(s *sundialv1.Schedule) *sundialv1.Schedule {
		if s.TimeZone == "" {
			s.TimeZone = "UTC"
		}
		return s
	}
	interval := func(iv *sundialv1.Interval) *sundialv1.Schedule {
		return utcSchedule(&sundialv1.Schedule{Kind: &sundialv1.Schedule_Interval{Interval: iv}})
	}
	cron := func(expr string) *sundialv1.Schedule {
		s := validSpec().Schedule
		s.Kind = &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: expr}}
		return s
	}

	cases := []struct {
		name   string
		mutate func(s *sundialv1.JobSpec)
		field  string
		reason string
	}{
		{"id empty", func(s *sundialv1.JobSpec) { s.Id = "" }, "id", "required"},
		{"id too long", func(s *sundialv1.JobSpec) { s.Id = long(201) }, "id", "at most 200"},
		{"id with @", func(s *sundialv1.JobSpec) { s.Id = "a@b" }, "id", `"@"`},
		{"id with space", func(s *sundialv1.JobSpec) { s.Id = "a b" }, "id", "characters outside"},
		{"owner team empty", func(s *sundialv1.JobSpec) { s.OwnerTeam = "" }, "owner_team", "required"},
		{"owner team too long", func(s *sundialv1.JobSpec) { s.OwnerTeam = long(65) }, "owner_team", "at most 64"},
		{"owner team characters", func(s *sundialv1.JobSpec) { s.OwnerTeam = "pay ments" }, "owner_team", "lowercase letters"},
		{"too many labels", func(s *sundialv1.JobSpec) { s.Labels = labels(65) }, "labels", "at most 64"},
		{"empty label key", func(s *sundialv1.JobSpec) { s.Labels = map[string]string{"": "v"} }, `labels[""]`, "empty label key"},
		{"label key too long", func(s *sundialv1.JobSpec) { s.Labels = map[string]string{long(257): "v"} }, `labels["` + long(257) + `"]`, "key of 257 bytes"},
		{"label value too long", func(s *sundialv1.JobSpec) { s.Labels = map[string]string{"env": long(257)} }, `labels["env"]`, "value of 257 bytes"},
		{"payload too large", func(s *sundialv1.JobSpec) { s.Payload = make([]byte, 256<<10+1) }, "payload", "262145 bytes, at most 262144"},
		{"description too long", func(s *sundialv1.JobSpec) { s.Description = long(4097) }, "description", "at most 4096"},

		{"schedule kind unset", func(s *sundialv1.JobSpec) { s.Schedule.Kind = nil }, "schedule.kind", "required"},
		{"unknown time zone", func(s *sundialv1.JobSpec) { s.Schedule.TimeZone = "Europe/Berln" }, "schedule.time_zone", `unknown time zone "Europe/Berln"`},
		{"local time zone", func(s *sundialv1.JobSpec) { s.Schedule.TimeZone = "Local" }, "schedule.time_zone", "Local"},
		{"bad cron", func(s *sundialv1.JobSpec) { s.Schedule = cron("30 25 * * *") }, "schedule.cron.expression", "25"},
		{"empty cron", func(s *sundialv1.JobSpec) { s.Schedule = cron("") }, "schedule.cron.expression", "required"},
		{"cron never fires", func(s *sundialv1.JobSpec) { s.Schedule = cron("0 0 30 2 *") }, "schedule.cron.expression", "never fires"},
		{"cron TZ prefix", func(s *sundialv1.JobSpec) { s.Schedule = cron("TZ=UTC 0 0 * * *") }, "schedule.cron.expression", "time zone prefix"},
		{"unknown nonexistent policy", func(s *sundialv1.JobSpec) { s.Schedule.Dst.Nonexistent = 9 }, "schedule.dst.nonexistent", "unknown"},
		{"unknown ambiguous policy", func(s *sundialv1.JobSpec) { s.Schedule.Dst.Ambiguous = 9 }, "schedule.dst.ambiguous", "unknown"},
		{"unknown misfire policy", func(s *sundialv1.JobSpec) { s.Schedule.MisfirePolicy = 9 }, "schedule.misfire_policy", "unknown policy 9"},
		{"negative catch-up window", func(s *sundialv1.JobSpec) { s.Schedule.CatchUpWindow = durationpb.New(-time.Second) }, "schedule.catch_up_window", "positive"},
		{"catch-up window too long", func(s *sundialv1.JobSpec) { s.Schedule.CatchUpWindow = durationpb.New(8 * 24 * time.Hour) }, "schedule.catch_up_window", "at most"},
		{"at without time", func(s *sundialv1.JobSpec) {
			s.Schedule = utcSchedule(&sundialv1.Schedule{Kind: &sundialv1.Schedule_At{At: &sundialv1.At{}}})
		}, "schedule.at.time", "required"},
		{"at with sub-millisecond", func(s *sundialv1.JobSpec) {
			s.Schedule = utcSchedule(&sundialv1.Schedule{Kind: &sundialv1.Schedule_At{At: &sundialv1.At{Time: &timestamppb.Timestamp{Seconds: 1e9, Nanos: 1}}}})
		}, "schedule.at.time", "whole millisecond"},
		{"at out of range", func(s *sundialv1.JobSpec) {
			s.Schedule = utcSchedule(&sundialv1.Schedule{Kind: &sundialv1.Schedule_At{At: &sundialv1.At{Time: &timestamppb.Timestamp{Seconds: math.MaxInt64}}}})
		}, "schedule.at.time", "invalid timestamp"},
		{"delay missing", func(s *sundialv1.JobSpec) {
			s.Schedule = utcSchedule(&sundialv1.Schedule{Kind: &sundialv1.Schedule_Delay{Delay: &sundialv1.Delay{}}})
		}, "schedule.delay.duration", "required"},
		{"delay negative", func(s *sundialv1.JobSpec) {
			s.Schedule = utcSchedule(&sundialv1.Schedule{Kind: &sundialv1.Schedule_Delay{Delay: &sundialv1.Delay{Duration: durationpb.New(-time.Minute)}}})
		}, "schedule.delay.duration", "positive"},
		{"interval every missing", func(s *sundialv1.JobSpec) { s.Schedule = interval(&sundialv1.Interval{}) }, "schedule.interval.every", "required"},
		{"interval too short", func(s *sundialv1.JobSpec) {
			s.Schedule = interval(&sundialv1.Interval{Every: durationpb.New(500 * time.Millisecond)})
		}, "schedule.interval.every", "at least 1s"},
		{"interval sub-millisecond", func(s *sundialv1.JobSpec) {
			s.Schedule = interval(&sundialv1.Interval{Every: durationpb.New(time.Second + time.Microsecond)})
		}, "schedule.interval.every", "whole milliseconds"},
		{"interval offset too large", func(s *sundialv1.JobSpec) {
			s.Schedule = interval(&sundialv1.Interval{Every: durationpb.New(time.Minute), Anchor: &sundialv1.Interval_Offset{Offset: durationpb.New(time.Minute)}})
		}, "schedule.interval.offset", "less than every"},
		{"interval start sub-millisecond", func(s *sundialv1.JobSpec) {
			s.Schedule = interval(&sundialv1.Interval{Every: durationpb.New(time.Minute), Anchor: &sundialv1.Interval_Start{Start: &timestamppb.Timestamp{Seconds: 1e9, Nanos: 5}}})
		}, "schedule.interval.start", "whole millisecond"},

		{"target missing", func(s *sundialv1.JobSpec) { s.Target = nil }, "target.kind", "required"},
		{"http method", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Method: "post", Url: "https://a.example/"})
		}, "target.http.method", `"post"`},
		{"http url missing", func(s *sundialv1.JobSpec) { s.Target = httpTarget(&sundialv1.HttpTarget{}) }, "target.http.url", "required"},
		{"http url unparsable", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Url: "http://a b.example/%zz"})
		}, "target.http.url", "cannot parse"},
		{"http url scheme", func(s *sundialv1.JobSpec) { s.Target = httpTarget(&sundialv1.HttpTarget{Url: "ftp://a.example/"}) }, "target.http.url", `scheme "ftp"`},
		{"http url relative", func(s *sundialv1.JobSpec) { s.Target = httpTarget(&sundialv1.HttpTarget{Url: "/v1/batches"}) }, "target.http.url", `scheme ""`},
		{"http url without host", func(s *sundialv1.JobSpec) { s.Target = httpTarget(&sundialv1.HttpTarget{Url: "https:///x"}) }, "target.http.url", "no host"},
		{"http url credentials", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Url: "https://u:p@a.example/"})
		}, "target.http.url", "credentials"},
		{"http url too long", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Url: "https://a.example/" + long(2048)})
		}, "target.http.url", "at most 2048"},
		{"http reserved header", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Url: "https://a.example/", Headers: map[string]string{"Idempotency-Key": "x"}})
		}, `target.http.headers["Idempotency-Key"]`, "reserved"},
		{"http sundial header", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Url: "https://a.example/", Headers: map[string]string{"sundial-run-id": "x"}})
		}, `target.http.headers["sundial-run-id"]`, "reserved"},
		{"http bad header name", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Url: "https://a.example/", Headers: map[string]string{"X Y": "x"}})
		}, `target.http.headers["X Y"]`, "not a valid HTTP header name"},
		{"http header value newline", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Url: "https://a.example/", Headers: map[string]string{"X": "a\r\nB: c"}})
		}, `target.http.headers["X"]`, "CR, LF"},
		{"http body too large", func(s *sundialv1.JobSpec) {
			s.Target = httpTarget(&sundialv1.HttpTarget{Url: "https://a.example/", Body: make([]byte, 256<<10+1)})
		}, "target.http.body", "at most 262144"},
		{"kafka topic missing", func(s *sundialv1.JobSpec) { s.Target = kafkaTarget(&sundialv1.KafkaTarget{}) }, "target.kafka.topic", "required"},
		{"kafka topic characters", func(s *sundialv1.JobSpec) { s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: "a/b"}) }, "target.kafka.topic", "characters outside"},
		{"kafka topic dot", func(s *sundialv1.JobSpec) { s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: ".."}) }, "target.kafka.topic", "not a valid"},
		{"kafka topic too long", func(s *sundialv1.JobSpec) { s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: long(250)}) }, "target.kafka.topic", "at most 249"},
		{"kafka topic of sundial", func(s *sundialv1.JobSpec) { s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: "sundial.jobs"}) }, "target.kafka.topic", "Sundial's own"},
		{"kafka topic of a prefixed sundial", func(s *sundialv1.JobSpec) {
			s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: "redteam.sundial.jobs.redteam-b"})
		}, "target.kafka.topic", "Sundial's own"},
		{"kafka topic of sundial runs behind any prefix", func(s *sundialv1.JobSpec) {
			s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: "prod-sundial.runs.default"})
		}, "target.kafka.topic", "Sundial's own"},
		{"kafka internal topic", func(s *sundialv1.JobSpec) {
			s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: "__consumer_offsets"})
		}, "target.kafka.topic", "Kafka's own"},
		{"kafka key too long", func(s *sundialv1.JobSpec) {
			s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: "t", Key: long(1025)})
		}, "target.kafka.key", "at most 1024"},
		{"kafka reserved header", func(s *sundialv1.JobSpec) {
			s.Target = kafkaTarget(&sundialv1.KafkaTarget{Topic: "t", Headers: map[string]string{"idempotency-key": "x"}})
		}, `target.kafka.headers["idempotency-key"]`, "reserved"},
		{"handler name missing", func(s *sundialv1.JobSpec) { s.Target = handler("") }, "target.handler.name", "required"},
		{"handler name characters", func(s *sundialv1.JobSpec) { s.Target = handler("a b") }, "target.handler.name", "characters outside"},
		{"handler name too long", func(s *sundialv1.JobSpec) { s.Target = handler(long(129)) }, "target.handler.name", "at most 128"},
		{"exec command missing", func(s *sundialv1.JobSpec) { s.Target = execTarget("") }, "target.exec.command", "required"},
		{"exec command is a path with spaces", func(s *sundialv1.JobSpec) { s.Target = execTarget("/bin/rm -rf") }, "target.exec.command", "characters outside"},

		{"unknown priority", func(s *sundialv1.JobSpec) { s.Priority = 7 }, "priority", "unknown priority 7"},
		{"too many attempts", func(s *sundialv1.JobSpec) { s.Retry.MaxAttempts = 1001 }, "retry.max_attempts", "at most 1000"},
		{"initial backoff zero", func(s *sundialv1.JobSpec) { s.Retry.InitialBackoff = durationpb.New(0) }, "retry.initial_backoff", "positive"},
		{"max backoff below initial", func(s *sundialv1.JobSpec) { s.Retry.MaxBackoff = durationpb.New(time.Second) }, "retry.max_backoff", "1s is less than initial_backoff 2s"},
		{"default max backoff below initial", func(s *sundialv1.JobSpec) {
			s.Retry.MaxBackoff = nil
			s.Retry.InitialBackoff = durationpb.New(10 * time.Minute)
		}, "retry.max_backoff", "the default"},
		{"multiplier below one", func(s *sundialv1.JobSpec) { s.Retry.Multiplier = 0.5 }, "retry.multiplier", "at least 1"},
		{"multiplier NaN", func(s *sundialv1.JobSpec) { s.Retry.Multiplier = math.NaN() }, "retry.multiplier", "finite"},
		{"multiplier too large", func(s *sundialv1.JobSpec) { s.Retry.Multiplier = 101 }, "retry.multiplier", "at most 100"},
		{"empty error code", func(s *sundialv1.JobSpec) { s.Retry.NonRetryableErrors = []string{"http_409", ""} }, "retry.non_retryable_errors[1]", "empty"},
		{"duplicate error code", func(s *sundialv1.JobSpec) { s.Retry.NonRetryableErrors = []string{"x", "x"} }, "retry.non_retryable_errors[1]", "twice"},
		{"error code characters", func(s *sundialv1.JobSpec) { s.Retry.NonRetryableErrors = []string{"a b"} }, "retry.non_retryable_errors[0]", "characters outside"},
		{"too many error codes", func(s *sundialv1.JobSpec) {
			s.Retry.NonRetryableErrors = nil
			for i := range 65 {
				s.Retry.NonRetryableErrors = append(s.Retry.NonRetryableErrors, "c"+strconv.Itoa(i))
			}
		}, "retry.non_retryable_errors", "at most 64"},
		{"timeout zero", func(s *sundialv1.JobSpec) { s.Timeout = durationpb.New(0) }, "timeout", "positive"},
		{"timeout sub-millisecond", func(s *sundialv1.JobSpec) { s.Timeout = durationpb.New(time.Second + 1) }, "timeout", "whole milliseconds"},
		{"timeout too long", func(s *sundialv1.JobSpec) { s.Timeout = durationpb.New(25 * time.Hour) }, "timeout", "at most 24h"},
		{"timeout invalid", func(s *sundialv1.JobSpec) { s.Timeout = &durationpb.Duration{Seconds: 1, Nanos: -1} }, "timeout", "invalid duration"},
		{"concurrency too high", func(s *sundialv1.JobSpec) { s.ConcurrencyLimit = 10001 }, "concurrency_limit", "at most 10000"},
		{"unknown overlap policy", func(s *sundialv1.JobSpec) {
			s.OverlapPolicy = 9
			s.QueueDelay = nil
		}, "overlap_policy", "unknown policy 9"},
		{"allow with a limit", func(s *sundialv1.JobSpec) {
			s.OverlapPolicy = sundialv1.OverlapPolicy_OVERLAP_POLICY_ALLOW
			s.QueueDelay = nil
		}, "overlap_policy", "ALLOW with concurrency_limit 1"},
		{"queue delay without queue", func(s *sundialv1.JobSpec) { s.OverlapPolicy = sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID }, "queue_delay", "only allowed with"},
		{"queue delay zero", func(s *sundialv1.JobSpec) { s.QueueDelay = durationpb.New(0) }, "queue_delay", "positive"},
		{"pool upper case", func(s *sundialv1.JobSpec) { s.Pool = "GPU" }, "pool", "outside [a-z0-9_-]"},
		{"pool too long", func(s *sundialv1.JobSpec) { s.Pool = long(65) }, "pool", "at most 64"},
		{"unknown strategy", func(s *sundialv1.JobSpec) { s.Routing = &sundialv1.Routing{Strategy: 42} }, "routing.strategy", "unknown strategy 42"},
		{"fixed without executor", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED}
		}, "routing.executor", "required"},
		{"fixed executor not a topic name", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "a/b"}
		}, "routing.executor", "names a Kafka topic"},
		{"executor without fixed", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN, Executor: "r1"}
		}, "routing.executor", "only allowed with strategy ROUTING_STRATEGY_FIXED"},
		{"fallback without fixed", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_RANDOM, Fallback: sundialv1.RoutingFallback_ROUTING_FALLBACK_WAIT}
		}, "routing.fallback", "only allowed with strategy ROUTING_STRATEGY_FIXED"},
		{"unknown fallback", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "r1", Fallback: 7}
		}, "routing.fallback", "unknown fallback 7"},
		{"sharded without shards", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED}
		}, "routing.shards", "required with strategy ROUTING_STRATEGY_SHARDED: from 1 to 1024"},
		{"too many shards", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: 1025}
		}, "routing.shards", "1025 shards, at most 1024"},
		{"shards without sharded", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST, Shards: 3}
		}, "routing.shards", "only allowed with strategy ROUTING_STRATEGY_SHARDED"},
		{"broadcast under forbid", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST}
			s.OverlapPolicy = sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID
			s.QueueDelay = nil
		}, "overlap_policy", "choose ALLOW or QUEUE"},
		{"sharded under a limit with no policy", func(s *sundialv1.JobSpec) {
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: 4}
			s.OverlapPolicy = sundialv1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED
			s.QueueDelay = nil
		}, "overlap_policy", "OVERLAP_POLICY_FORBID with strategy ROUTING_STRATEGY_SHARDED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := validSpec()
			c.mutate(spec)
			errs := jobspec.Validate(spec)
			require.Len(t, errs, 1, "want exactly one error, got %v", errs)
			assert.Equal(t, c.field, errs[0].Field)
			assert.Contains(t, errs[0].Reason, c.reason)
		})
	}
}

func TestRoutingSpecsPass(t *testing.T) {
	t.Parallel()
	for _, r := range []*sundialv1.Routing{
		nil,
		{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN},
		{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_RANDOM},
		{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_LEAST_LOADED},
		{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "runner-1.eu"},
		{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "r1", Fallback: sundialv1.RoutingFallback_ROUTING_FALLBACK_WAIT},
		{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST},
		{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: 1},
		{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: 1024},
	} {
		spec := validSpec()
		spec.Pool = "gpu_eu-1"
		spec.Routing = r
		assert.Empty(t, jobspec.Validate(spec), "routing %v", r)
	}
}

func TestValidateReportsEveryError(t *testing.T) {
	t.Parallel()
	spec := validSpec()
	spec.Schedule.TimeZone = "Europe/Berln"
	spec.Schedule.Kind = &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "30 25 * * *"}}
	spec.Retry.MaxBackoff = durationpb.New(time.Second)
	spec.OwnerTeam = ""
	var fields []string
	for _, e := range jobspec.Validate(spec) {
		fields = append(fields, e.Field)
	}
	assert.Equal(t, []string{"owner_team", "schedule.cron.expression", "schedule.time_zone", "retry.max_backoff"}, fields)
}

func TestValidateNil(t *testing.T) {
	t.Parallel()
	errs := jobspec.Validate(nil)
	require.Len(t, errs, 1)
	assert.Equal(t, "record", errs[0].Field)
}

func TestPayloadLimitIsConfigurable(t *testing.T) {
	t.Parallel()
	spec := validSpec()
	spec.Payload = make([]byte, 2000)
	errs := jobspec.Limits{MaxPayloadBytes: 1024}.ValidateSpec(spec)
	require.Len(t, errs, 1)
	assert.Equal(t, "payload", errs[0].Field)
	assert.Contains(t, errs[0].Reason, "2000 bytes, at most 1024")
	assert.Error(t, jobspec.Limits{MaxPayloadBytes: -1}.Validate())
}

func TestPastAtIsValid(t *testing.T) {
	t.Parallel()
	spec := validSpec()
	spec.Schedule = &sundialv1.Schedule{
		Kind:     &sundialv1.Schedule_At{At: &sundialv1.At{Time: timestamppb.New(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))}},
		TimeZone: "UTC",
	}
	assert.Empty(t, jobspec.Validate(spec))
}

func execTarget(command string) *sundialv1.Target {
	return &sundialv1.Target{Kind: &sundialv1.Target_Exec{Exec: &sundialv1.ExecTarget{Command: command}}}
}
