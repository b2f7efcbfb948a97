package jobspec

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// FieldError is one bad value of a definition: the path of the field in
// protobuf field names ("schedule.cron.expression", "labels[\"env\"]",
// "retry.non_retryable_errors[2]"), or "record", "key" or "content_type" for
// a problem with the Kafka record rather than a field, and the reason.
type FieldError struct {
	Field  string
	Reason string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Reason }

// Proto returns the error as it travels in a JobStatus.
func (e FieldError) Proto() *sundialv1.FieldError {
	return &sundialv1.FieldError{Field: e.Field, Reason: e.Reason}
}

// ValidationError is a definition with at least one bad value. Its Errors
// list every one of them, in the order of the definition's fields.
type ValidationError struct {
	JobID  string
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %q is invalid:", e.JobID)
	for _, fe := range e.Errors {
		b.WriteString("\n  ")
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Limits bounds the sizes of a definition. The zero value means the defaults;
// a field left zero takes its default.
type Limits struct {
	// MaxPayloadBytes bounds JobSpec.payload and target.http.body. Every run
	// record carries the payload, and Kafka refuses records above the broker's
	// message.max.bytes (1 MiB by default), so the payload must leave room
	// for the rest of the run. Default DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// MaxLabels bounds the number of labels. Default 64.
	MaxLabels int
	// MaxLabelBytes bounds each label key and each label value, in bytes.
	// Default 256.
	MaxLabelBytes int
}

// Defaults and fixed bounds of a definition.
const (
	// DefaultMaxPayloadBytes is the default bound of a payload: 256 KiB.
	DefaultMaxPayloadBytes = 256 << 10

	// MaxSpecBytes bounds the encoded (protobuf) size of a whole
	// definition, a JobSpec or a DagSpec: 512 KiB. Every run record embeds
	// its job's spec and travels through Kafka, whose records are limited
	// to about 1 MB (message.max.bytes 1,048,588; the producer's 1,000,012
	// with headers). Half of that leaves room for what a run, a retry or
	// a dead letter adds around the spec, so that no accepted definition
	// produces a run that can never be dispatched. Each part has its own
	// bound (payload, body, headers); this one bounds their sum.
	MaxSpecBytes = 512 << 10
	// MaxIDLength is the longest job id.
	MaxIDLength = 200
	// MaxOwnerTeamLength is the longest owner team name.
	MaxOwnerTeamLength = 64
	// MaxDescriptionBytes bounds the free-text description.
	MaxDescriptionBytes = 4096
	// MaxURLLength bounds an HTTP target's URL.
	MaxURLLength = 2048
	// MaxHeaders bounds the extra headers of an HTTP or Kafka target.
	MaxHeaders = 64
	// MaxHeaderBytes bounds each header name and each header value.
	MaxHeaderBytes = 4096
	// MaxKafkaKeyBytes bounds a Kafka target's record key.
	MaxKafkaKeyBytes = 1024
	// MaxHandlerNameLength bounds a handler name.
	MaxHandlerNameLength = 128
	// MaxAttempts bounds RetryPolicy.max_attempts.
	MaxAttempts = 1000
	// MaxMultiplier bounds RetryPolicy.multiplier.
	MaxMultiplier = 100
	// MaxNonRetryableErrors bounds the list of non-retryable error codes.
	MaxNonRetryableErrors = 64
	// MaxErrorCodeLength bounds each non-retryable error code.
	MaxErrorCodeLength = 64
	// MaxTimeout bounds JobSpec.timeout: a lease is renewed for the whole
	// attempt, and an attempt that runs for days is a stuck one.
	MaxTimeout = 24 * time.Hour
	// MaxBackoff bounds RetryPolicy.initial_backoff and max_backoff.
	MaxBackoff = 7 * 24 * time.Hour
	// MaxQueueDelay bounds JobSpec.queue_delay.
	MaxQueueDelay = time.Hour
	// MaxCatchUpWindow bounds Schedule.catch_up_window: catch-up never looks
	// further back than the run topics' retention.
	MaxCatchUpWindow = 7 * 24 * time.Hour
	// MaxConcurrencyLimit bounds JobSpec.concurrency_limit (each slot is a
	// lease in Redis).
	MaxConcurrencyLimit = 10000
)

// Defaults the runners apply to unset fields, as the .proto files state them.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultQueueDelay     = time.Second
	DefaultMaxAttempts    = 3
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoffCap  = 5 * time.Minute
	DefaultMultiplier     = 2.0
	DefaultCatchUpWindow  = time.Hour
)

func (l Limits) withDefaults() Limits {
	l.MaxPayloadBytes = cmp.Or(l.MaxPayloadBytes, DefaultMaxPayloadBytes)
	l.MaxLabels = cmp.Or(l.MaxLabels, 64)
	l.MaxLabelBytes = cmp.Or(l.MaxLabelBytes, 256)
	return l
}

// Validate reports every bad value of the limits themselves.
func (l Limits) Validate() error {
	var errs []string
	if l.MaxPayloadBytes < 0 {
		errs = append(errs, fmt.Sprintf("max payload bytes %d: must not be negative", l.MaxPayloadBytes))
	}
	if l.MaxLabels < 0 {
		errs = append(errs, fmt.Sprintf("max labels %d: must not be negative", l.MaxLabels))
	}
	if l.MaxLabelBytes < 0 {
		errs = append(errs, fmt.Sprintf("max label bytes %d: must not be negative", l.MaxLabelBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("limits: %s", strings.Join(errs, "; "))
	}
	return nil
}

var (
	// idPattern is the alphabet of job ids. '@' is not in it: run ids are
	// job id + "@" + due time, and must split unambiguously.
	idPattern        = regexp.MustCompile(`^[A-Za-z0-9._:/-]+$`)
	handlerPattern   = regexp.MustCompile(`^[A-Za-z0-9._:/-]+$`)
	topicPattern     = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	errorCodePattern = regexp.MustCompile(`^[A-Za-z0-9._:/-]+$`)
	// headerNamePattern is an HTTP token (RFC 9110, section 5.6.2).
	headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// reservedHTTPHeaders are set by the runner on every request.
var reservedHTTPHeaders = []string{"idempotency-key"}

// transportHTTPHeaders are headers Go's HTTP client sets itself (Host from
// the URL, the framing from the body) or drops as hop-by-hop: a target's
// value would never reach the downstream, so it is refused, not ignored.
var transportHTTPHeaders = []string{
	"host", "content-length", "transfer-encoding",
	"connection", "keep-alive", "proxy-connection", "upgrade", "te", "trailer",
}

// reservedKafkaHeaders are set by the runner on every record.
var reservedKafkaHeaders = []string{"idempotency-key"}

// CheckID reports why id cannot be a job id, or "" when it can.
func CheckID(id string) string {
	switch {
	case id == "":
		return "required"
	case len(id) > MaxIDLength:
		return fmt.Sprintf("%d characters, at most %d allowed", len(id), MaxIDLength)
	case strings.Contains(id, "@"):
		return `must not contain "@": run ids are <job id>@<due time>`
	case !idPattern.MatchString(id):
		return fmt.Sprintf("%q has characters outside [A-Za-z0-9._:/-]", id)
	}
	return ""
}

// Validate checks every field of a definition against the default limits and
// returns every problem found, in field order; nil means valid. It is pure:
// it reads no clock, so an "at" instant in the past is valid (whether it
// still fires is the misfire policy's call, see FirstDue).
func Validate(spec *sundialv1.JobSpec) []FieldError {
	return Limits{}.ValidateSpec(spec)
}

// ValidateSpec checks a definition against l. See the package function
// Validate.
func (l Limits) ValidateSpec(spec *sundialv1.JobSpec) []FieldError {
	return l.validateSpec(spec, false)
}

// ValidateInline checks the job of a DAG's inline node, whose id is
// <dag id>/<node id>: the DAG's id carries the namespace rule
// (CheckOwnedID), so the node's id is checked for its alphabet and length
// only (CheckID). Everything else is checked as ValidateSpec does.
func (l Limits) ValidateInline(spec *sundialv1.JobSpec) []FieldError {
	return l.validateSpec(spec, true)
}

func (l Limits) validateSpec(spec *sundialv1.JobSpec, inline bool) []FieldError {
	l = l.withDefaults()
	v := &validator{}
	if spec == nil {
		v.add("record", "no job definition")
		return v.errs
	}
	if r := CheckEncodedSize(spec); r != "" {
		v.add("record", "%s", r)
	}
	owned := CheckOwnedID(spec.GetId(), spec.GetOwnerTeam())
	if inline {
		owned = slices.DeleteFunc(owned, func(fe FieldError) bool { return fe.Field == "id" })
		if r := CheckID(spec.GetId()); r != "" {
			owned = append([]FieldError{{"id", r}}, owned...)
		}
	}
	for _, fe := range owned {
		v.add(fe.Field, "%s", fe.Reason)
	}
	v.labels(l, spec.GetLabels())
	if n := len(spec.GetPayload()); n > l.MaxPayloadBytes {
		v.add("payload", "%d bytes, at most %d allowed (the limit keeps every run record under Kafka's record size)", n, l.MaxPayloadBytes)
	}
	if s := spec.GetSchedule(); s != nil {
		_, errs := compileSchedule(s, validationReference)
		v.errs = append(v.errs, errs...)
	}
	v.target(l, spec.GetTarget())
	if p := spec.GetPriority(); !definedEnum(sundialv1.Priority_name, int32(p)) {
		v.add("priority", "unknown priority %d: want PRIORITY_HIGH, PRIORITY_DEFAULT or PRIORITY_LOW", int32(p))
	}
	v.retry(spec.GetRetry())
	if d := spec.GetTimeout(); d != nil {
		v.duration("timeout", d, time.Millisecond, MaxTimeout)
	}
	if c := spec.GetConcurrencyLimit(); c > MaxConcurrencyLimit {
		v.add("concurrency_limit", "%d, at most %d allowed", c, MaxConcurrencyLimit)
	}
	v.overlap(spec)
	v.splay(spec)
	v.routing(spec)
	if n := len(spec.GetDescription()); n > MaxDescriptionBytes {
		v.add("description", "%d bytes, at most %d allowed", n, MaxDescriptionBytes)
	}
	return v.errs
}

// validationReference stands in for the acceptance instant when a schedule is
// checked without one: immediate and delay schedules need some reference to
// compile, and no rule depends on its value.
var validationReference = time.Unix(0, 0).UTC()

type validator struct {
	errs []FieldError
}

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// CheckEncodedSize reports why a definition (a JobSpec or a DagSpec) is too
// large to be accepted, or "": its protobuf encoding must stay within
// MaxSpecBytes, whatever encoding it arrived in.
func CheckEncodedSize(spec proto.Message) string {
	if n := proto.Size(spec); n > MaxSpecBytes {
		return fmt.Sprintf("the definition encodes to %d bytes, at most %d (512 KiB) allowed: every run record embeds it, and Kafka refuses records over about 1 MB", n, MaxSpecBytes)
	}
	return ""
}

// CheckOwnedID reports why id and team cannot be the id and owner_team of
// a defined job or DAG, or nil. This is the namespace rule, the one home of
// it: owner_team is a team name (topics.ValidTeam: it names the team's topic
// sundial.jobs.<team>). The id has no '/' (reserved for a DAG's inline
// nodes, <dag id>/<node id>, so no job can take a node's id and its runs)
// and no empty dot-separated segment. Ids need not start with
// <owner_team>.: an id belongs to the team that stored it first, and the
// registry checks the stored owner on every change (docs/architecture.md,
// Tenancy).
// A job stored before the rule (a legacy id) may keep its id: the registry
// decides that, knowing the stored job (see LegacyAllowed).
func CheckOwnedID(id, team string) []FieldError {
	var errs []FieldError
	switch {
	case team == "":
		errs = append(errs, FieldError{"owner_team", `required: the owning team's name, for example "payments"`})
	case len(team) > MaxOwnerTeamLength:
		errs = append(errs, FieldError{"owner_team", fmt.Sprintf("%d characters, at most %d allowed", len(team), MaxOwnerTeamLength)})
	default:
		if err := topics.ValidTeam(team); err != nil {
			errs = append(errs, FieldError{"owner_team", err.Error()})
		}
	}
	if r := CheckID(id); r != "" {
		return append([]FieldError{{"id", r}}, errs...)
	}
	var r string
	switch {
	case strings.Contains(id, "/"):
		r = fmt.Sprintf(`%q contains "/": it is reserved for the inline nodes of DAGs (<dag id>/<node id>)`, id)
	case strings.HasPrefix(id, ".") || strings.HasSuffix(id, ".") || strings.Contains(id, ".."):
		r = fmt.Sprintf("%q has an empty segment (a leading or trailing dot, or two dots in a row)", id)
	}
	if r != "" {
		errs = append([]FieldError{{"id", r}}, errs...)
	}
	return errs
}

// LegacyAllowed returns errs without the namespace problems of spec
// (CheckOwnedID) when they may be forgiven: the job is stored already
// under the same id with the same owner_team (storedOwner), so it was
// defined before ids were namespaced, and its owner may still change it.
// Any other problem stays.
func LegacyAllowed(errs []FieldError, spec *sundialv1.JobSpec, storedOwner string, stored bool) []FieldError {
	if !stored || spec == nil || spec.GetOwnerTeam() != storedOwner {
		return errs
	}
	ns := CheckOwnedID(spec.GetId(), spec.GetOwnerTeam())
	if len(ns) == 0 {
		return errs
	}
	legacyBad := CheckID(spec.GetId()) != "" // the alphabet was never optional
	var out []FieldError
	for _, fe := range errs {
		if slices.Contains(ns, fe) && (fe.Field != "id" || !legacyBad) {
			continue
		}
		out = append(out, fe)
	}
	return out
}

func (v *validator) labels(l Limits, labels map[string]string) {
	if len(labels) > l.MaxLabels {
		v.add("labels", "%d labels, at most %d allowed", len(labels), l.MaxLabels)
	}
	for _, k := range sortedKeys(labels) {
		field := "labels[" + strconv.Quote(k) + "]"
		switch {
		case k == "":
			v.add(field, "empty label key")
		case len(k) > l.MaxLabelBytes:
			v.add(field, "key of %d bytes, at most %d allowed", len(k), l.MaxLabelBytes)
		}
		if n := len(labels[k]); n > l.MaxLabelBytes {
			v.add(field, "value of %d bytes, at most %d allowed", n, l.MaxLabelBytes)
		}
	}
}

func (v *validator) target(l Limits, t *sundialv1.Target) {
	switch k := t.GetKind().(type) {
	case *sundialv1.Target_Http:
		v.httpTarget(l, k.Http)
	case *sundialv1.Target_Kafka:
		v.kafkaTarget(k.Kafka)
	case *sundialv1.Target_Handler:
		name := k.Handler.GetName()
		switch {
		case name == "":
			v.add("target.handler.name", "required: the name the handler is registered under in the runners")
		case len(name) > MaxHandlerNameLength:
			v.add("target.handler.name", "%d characters, at most %d allowed", len(name), MaxHandlerNameLength)
		case !handlerPattern.MatchString(name):
			v.add("target.handler.name", "%q has characters outside [A-Za-z0-9._:/-]", name)
		}
	case *sundialv1.Target_Exec:
		name := k.Exec.GetCommand()
		switch {
		case name == "":
			v.add("target.exec.command", "required: the name the command is allowed under in the runners (--exec-allow)")
		case len(name) > MaxHandlerNameLength:
			v.add("target.exec.command", "%d characters, at most %d allowed", len(name), MaxHandlerNameLength)
		case !handlerPattern.MatchString(name):
			v.add("target.exec.command", "%q has characters outside [A-Za-z0-9._:/-]", name)
		}
	default:
		v.add("target.kind", "required: one of http, kafka, handler, exec")
	}
}

func (v *validator) httpTarget(l Limits, h *sundialv1.HttpTarget) {
	if m := h.GetMethod(); m != "" && !slices.Contains(httpMethods, m) {
		v.add("target.http.method", "%q is not one of %s (upper case)", m, strings.Join(httpMethods, ", "))
	}
	raw := h.GetUrl()
	switch u, err := url.Parse(raw); {
	case raw == "":
		v.add("target.http.url", "required: an absolute http:// or https:// URL")
	case len(raw) > MaxURLLength:
		v.add("target.http.url", "%d characters, at most %d allowed", len(raw), MaxURLLength)
	case err != nil:
		v.add("target.http.url", "cannot parse %q: %v", RedactURL(raw, h), unwrapURLError(err))
	case u.Scheme != "http" && u.Scheme != "https":
		v.add("target.http.url", "scheme %q: want http or https", u.Scheme)
	case u.Host == "":
		v.add("target.http.url", "%q has no host", RedactURL(raw, h))
	case u.User != nil:
		v.add("target.http.url", "credentials in the URL are refused: they would travel in every run record; pass them in a header")
	case u.Fragment != "":
		v.add("target.http.url", "a fragment (#%s) is never sent to a server", u.Fragment)
	}
	v.headers("target.http.headers", h.GetHeaders(), true)
	v.checkSecrets(h)
	if n := len(h.GetBody()); n > l.MaxPayloadBytes {
		v.add("target.http.body", "%d bytes, at most %d allowed", n, l.MaxPayloadBytes)
	}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// sundialTopics are the names of Sundial's own topics after "sundial.";
// a name continues with "." or ends there.
var sundialTopics = []string{"jobs", "triggers", "runs", "events", "dlq", "shards", "executors", "audit"}

// sundialTopic reports whether topic is, or may be, one of Sundial's own
// under some installation's topic prefix: sundial.*, or any prefix followed
// by sundial.<one of Sundial's topic names>. Validation cannot know the
// installation's prefix, so it refuses every one; the runner refuses the
// installation's own exactly.
func sundialTopic(topic string) bool {
	if strings.HasPrefix(topic, "sundial.") {
		return true
	}
	for i := strings.Index(topic, "sundial."); i >= 0; {
		rest := topic[i+len("sundial."):]
		for _, name := range sundialTopics {
			if r, ok := strings.CutPrefix(rest, name); ok && (r == "" || r[0] == '.') {
				return true
			}
		}
		next := strings.Index(rest, "sundial.")
		if next < 0 {
			break
		}
		i += len("sundial.") + next
	}
	return false
}

func (v *validator) kafkaTarget(k *sundialv1.KafkaTarget) {
	topic := k.GetTopic()
	switch {
	case topic == "":
		v.add("target.kafka.topic", "required")
	case len(topic) > 249:
		v.add("target.kafka.topic", "%d characters, Kafka allows at most 249", len(topic))
	case topic == "." || topic == "..":
		v.add("target.kafka.topic", "%q is not a valid Kafka topic name", topic)
	case !topicPattern.MatchString(topic):
		v.add("target.kafka.topic", "%q has characters outside [A-Za-z0-9._-]", topic)
	case strings.HasPrefix(topic, "__"):
		v.add("target.kafka.topic", "%q: topics named __* are Kafka's own; a job must not write into them", topic)
	case sundialTopic(topic):
		v.add("target.kafka.topic", "%q: topics named sundial.* (after any installation's topic prefix) are Sundial's own; a job must not write into them", topic)
	}
	if n := len(k.GetKey()); n > MaxKafkaKeyBytes {
		v.add("target.kafka.key", "%d bytes, at most %d allowed", n, MaxKafkaKeyBytes)
	}
	v.headers("target.kafka.headers", k.GetHeaders(), false)
}

func (v *validator) headers(path string, headers map[string]string, httpTarget bool) {
	if len(headers) > MaxHeaders {
		v.add(path, "%d headers, at most %d allowed", len(headers), MaxHeaders)
	}
	reserved := reservedKafkaHeaders
	if httpTarget {
		reserved = reservedHTTPHeaders
	}
	for _, name := range sortedKeys(headers) {
		field := path + "[" + strconv.Quote(name) + "]"
		lower := strings.ToLower(name)
		value := headers[name]
		switch {
		case name == "":
			v.add(field, "empty header name")
		case len(name) > MaxHeaderBytes:
			v.add(field, "name of %d bytes, at most %d allowed", len(name), MaxHeaderBytes)
		case httpTarget && !headerNamePattern.MatchString(name):
			v.add(field, "%q is not a valid HTTP header name", name)
		case slices.Contains(reserved, lower) || strings.HasPrefix(lower, "sundial-"):
			v.add(field, "reserved: Sundial sets %s itself on every attempt", name)
		case httpTarget && slices.Contains(transportHTTPHeaders, lower):
			v.add(field, "%s is set by the HTTP client from the URL and the body, or is a hop-by-hop header: the runner would drop it silently", name)
		}
		switch {
		case len(value) > MaxHeaderBytes:
			v.add(field, "value of %d bytes, at most %d allowed", len(value), MaxHeaderBytes)
		case httpTarget && strings.ContainsAny(value, "\r\n\x00"):
			v.add(field, "value contains CR, LF or NUL")
		}
	}
}

func (v *validator) retry(r *sundialv1.RetryPolicy) {
	if r == nil {
		return
	}
	if n := r.GetMaxAttempts(); n > MaxAttempts {
		v.add("retry.max_attempts", "%d, at most %d allowed", n, MaxAttempts)
	}
	initial, initialOK := DefaultInitialBackoff, true
	if d := r.GetInitialBackoff(); d != nil {
		initial, initialOK = v.duration("retry.initial_backoff", d, time.Millisecond, MaxBackoff)
	}
	if d := r.GetMaxBackoff(); d != nil {
		if maxB, ok := v.duration("retry.max_backoff", d, time.Millisecond, MaxBackoff); ok && initialOK && maxB < initial {
			v.add("retry.max_backoff", "%s is less than initial_backoff %s", maxB, initial)
		}
	} else if initialOK && initial > DefaultMaxBackoffCap {
		v.add("retry.max_backoff", "unset, so %s (the default), which is less than initial_backoff %s: set max_backoff", DefaultMaxBackoffCap, initial)
	}
	switch m := r.GetMultiplier(); {
	case math.IsNaN(m) || math.IsInf(m, 0):
		v.add("retry.multiplier", "must be a finite number")
	case m == 0: // the default
	case m < 1:
		v.add("retry.multiplier", "%g: must be at least 1 (0 means the default, 2)", m)
	case m > MaxMultiplier:
		v.add("retry.multiplier", "%g: at most %d allowed", m, MaxMultiplier)
	}
	codes := r.GetNonRetryableErrors()
	if len(codes) > MaxNonRetryableErrors {
		v.add("retry.non_retryable_errors", "%d codes, at most %d allowed", len(codes), MaxNonRetryableErrors)
	}
	for i, c := range codes {
		field := fmt.Sprintf("retry.non_retryable_errors[%d]", i)
		switch {
		case c == "":
			v.add(field, "empty error code")
		case len(c) > MaxErrorCodeLength:
			v.add(field, "%d characters, at most %d allowed", len(c), MaxErrorCodeLength)
		case !errorCodePattern.MatchString(c):
			v.add(field, "%q has characters outside [A-Za-z0-9._:/-]", c)
		case slices.Contains(codes[:i], c):
			v.add(field, "%q is listed twice", c)
		}
	}
}

func (v *validator) overlap(spec *sundialv1.JobSpec) {
	p := spec.GetOverlapPolicy()
	switch {
	case !definedEnum(sundialv1.OverlapPolicy_name, int32(p)):
		v.add("overlap_policy", "unknown policy %d: want ALLOW, FORBID, QUEUE or REPLACE", int32(p))
	case p == sundialv1.OverlapPolicy_OVERLAP_POLICY_ALLOW && spec.GetConcurrencyLimit() > 0:
		v.add("overlap_policy", "ALLOW with concurrency_limit %d: ALLOW means no limit; choose FORBID, QUEUE or REPLACE, or set concurrency_limit to 0", spec.GetConcurrencyLimit())
	}
	if d := spec.GetQueueDelay(); d != nil {
		if p != sundialv1.OverlapPolicy_OVERLAP_POLICY_QUEUE {
			v.add("queue_delay", "only allowed with overlap_policy OVERLAP_POLICY_QUEUE")
		} else {
			v.duration("queue_delay", d, time.Millisecond, MaxQueueDelay)
		}
	}
}

// splay checks JobSpec.splay: zero (none), or whole milliseconds up to
// MaxSplay on a recurring schedule, and for an interval schedule up to its
// interval, so that a run fires before its next occurrence is due.
func (v *validator) splay(spec *sundialv1.JobSpec) {
	d := spec.GetSplay()
	if d == nil || (d.GetSeconds() == 0 && d.GetNanos() == 0) {
		return
	}
	if !recurring(spec.GetSchedule()) {
		v.add("splay", "only allowed with a cron or interval schedule: it spreads the runs of a recurring schedule")
		return
	}
	got, ok := v.duration("splay", d, time.Millisecond, MaxSplay)
	if !ok {
		return
	}
	if every := spec.GetSchedule().GetInterval().GetEvery(); every != nil && got > every.AsDuration() {
		v.add("splay", "%s: at most the schedule's interval (%s) allowed", got, every.AsDuration())
	}
}

// duration checks a positive duration of whole milliseconds at least min and
// at most max, and returns it.
func (v *validator) duration(field string, d *durationpb.Duration, minD, maxD time.Duration) (time.Duration, bool) {
	got, reason := checkDuration(d, minD, maxD)
	if reason != "" {
		v.add(field, "%s", reason)
		return 0, false
	}
	return got, true
}

func checkDuration(d *durationpb.Duration, minD, maxD time.Duration) (time.Duration, string) {
	if err := d.CheckValid(); err != nil {
		return 0, fmt.Sprintf("invalid duration: %v", err)
	}
	if d.GetSeconds() > int64(maxD/time.Second)+1 {
		return 0, fmt.Sprintf("%ds, at most %s allowed", d.GetSeconds(), maxD)
	}
	got := d.AsDuration()
	switch {
	case got <= 0:
		return 0, fmt.Sprintf("must be positive, got %s", got)
	case got%time.Millisecond != 0:
		return 0, fmt.Sprintf("%s: must be whole milliseconds", got)
	case got < minD:
		return 0, fmt.Sprintf("%s: at least %s required", got, minD)
	case got > maxD:
		return 0, fmt.Sprintf("%s: at most %s allowed", got, maxD)
	}
	return got, ""
}

func checkTimestamp(ts *timestamppb.Timestamp) (time.Time, string) {
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, fmt.Sprintf("invalid timestamp: %v", err)
	}
	t := ts.AsTime()
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		return time.Time{}, fmt.Sprintf("%s: must be a whole millisecond (run ids carry milliseconds)", t.Format(time.RFC3339Nano))
	}
	return t, ""
}

func definedEnum(names map[int32]string, v int32) bool {
	_, ok := names[v]
	return ok
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
