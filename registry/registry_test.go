package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/store"
)

// malformed returns the i-th kind of bad record and the field its status
// must name first.
func malformed(t testing.TB, i int) (*kgo.Record, string) {
	id := fmt.Sprintf("team.bad-%04d", i)
	spec := cronSpec(id, "0 3 * * *")
	switch i % 12 {
	case 0: // JSON without its content-type header
		rec := jobRecord(t, spec, sundialv1.EncodingJSON)
		rec.Headers = nil
		return rec, "record"
	case 1:
		return &kgo.Record{Key: []byte(id), Value: []byte{0xff, 0x01, 0x02}}, "record"
	case 2:
		rec := jobRecord(t, spec, sundialv1.EncodingProtobuf)
		rec.Key = []byte(id + "-other")
		return rec, "id"
	case 3:
		spec.Schedule.TimeZone = "Mars/Olympus_Mons"
		return jobRecord(t, spec, sundialv1.EncodingJSON), "schedule.time_zone"
	case 4:
		spec.Schedule.GetCron().Expression = "61 * * * *"
		return jobRecord(t, spec, sundialv1.EncodingProtobuf), "schedule.cron.expression"
	case 5:
		spec.Payload = make([]byte, 2048)
		return jobRecord(t, spec, sundialv1.EncodingProtobuf), "payload"
	case 6:
		rec := jobRecord(t, spec, sundialv1.EncodingProtobuf)
		rec.Headers = []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/xml")}}
		return rec, "content_type"
	case 7:
		spec.Target = &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: "ftp://x.example/"}}}
		return jobRecord(t, spec, sundialv1.EncodingJSON), "target.http.url"
	case 8:
		spec.OwnerTeam = ""
		return jobRecord(t, spec, sundialv1.EncodingProtobuf), "owner_team"
	case 9:
		return &kgo.Record{
			Key: []byte(id), Value: []byte(`{"id":"` + id + `","ownerTeem":"typo"}`),
			Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}},
		}, "record"
	case 10:
		spec.Id = "bad@" + id
		return jobRecord(t, spec, sundialv1.EncodingProtobuf), "key"
	default:
		return &kgo.Record{Key: []byte(id), Value: []byte{}}, "record"
	}
}

// testMalformedInterleaved: 1,000 malformed definitions between 1,000 valid
// ones. Every valid one is stored, scheduled and acknowledged; every bad one
// is rejected naming its field; then a replay of the whole topic by another
// group changes nothing.
func testMalformedInterleaved(t *testing.T, s *stack) {
	const n = 1000
	limits := func(c *registry.Config) { c.Limits.MaxPayloadBytes = 1024 }
	_, metrics := s.startRegistry("registry", limits)

	var recs []*kgo.Record
	wantField := map[int]string{}
	for i := range n {
		enc := sundialv1.EncodingProtobuf
		if i%2 == 1 {
			enc = sundialv1.EncodingJSON
		}
		recs = append(recs, jobRecord(t, cronSpec(fmt.Sprintf("team.job-%04d", i), "0 3 * * *"), enc))
		bad, field := malformed(t, i)
		wantField[len(recs)] = field
		recs = append(recs, bad)
	}
	start := time.Now()
	s.produce(recs...)
	answers := s.statuses.wait(t, 1, recs...)
	t.Logf("%d records answered in %s", len(recs), time.Since(start).Round(time.Millisecond))

	var due time.Time
	for i, a := range answers {
		rec := recs[i]
		assert.Equal(t, rec.Key, a.key, "status keyed by the original key")
		assert.Equal(t, rec.Topic, a.status.GetSource().GetTopic())
		if field, bad := wantField[i]; bad {
			require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, a.status.GetOutcome(), "record %d (%s)", i, rec.Key)
			assert.False(t, a.status.GetAccepted())
			require.NotEmpty(t, a.status.GetErrors())
			assert.Equal(t, field, a.status.GetErrors()[0].GetField(), "record %d: %v", i, a.status.GetErrors())
			assert.NotEmpty(t, a.status.GetErrors()[0].GetReason())
			continue
		}
		require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, a.status.GetOutcome(), "record %d: %v", i, a.status.GetErrors())
		assert.True(t, a.status.GetAccepted())
		assert.Equal(t, headerValue(rec, "content-type"), a.contentType, "answered in the record's encoding")
		assert.Equal(t, uint32(store.ShardOf(string(rec.Key), shards)), a.status.GetShard())
		next := a.status.GetNextDueTime().AsTime()
		assert.Equal(t, 3, next.Hour())
		due = next
	}
	// Every valid definition is stored and has its one pending entry.
	before := s.snapshot(due)
	require.Len(t, before.entries, n)
	for i := 0; i < len(recs); i += 2 {
		job, err := s.store.GetJob(t.Context(), string(recs[i].Key))
		require.NoError(t, err)
		assert.Equal(t, recs[i].Offset, job.Revision)
		assert.Equal(t, due, job.NextDue)
	}
	assert.Equal(t, float64(n), counter(t, metrics, "sundial_registry_records_total", "outcome", "created"))
	assert.Equal(t, float64(n), counter(t, metrics, "sundial_registry_records_total", "outcome", "rejected"))
	assert.Equal(t, float64(n/12+1), counter(t, metrics, "sundial_registry_rejections_total", "field", "schedule.time_zone"))

	// A replay of the topic (a new group reads it from the start) changes
	// nothing: valid definitions are UNCHANGED, bad ones rejected alike, and
	// no due entry or job row moves.
	s.startRegistry("replay", limits)
	replayed := s.statuses.wait(t, 2, recs...)
	for i, a := range replayed {
		first := answers[i].status
		if _, bad := wantField[i]; bad {
			assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, a.status.GetOutcome())
			assert.True(t, proto.Equal(&sundialv1.JobStatus{Errors: first.GetErrors()}, &sundialv1.JobStatus{Errors: a.status.GetErrors()}))
			continue
		}
		assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED, a.status.GetOutcome(), "record %d", i)
		assert.Equal(t, first.GetNextDueTime().AsTime(), a.status.GetNextDueTime().AsTime())
	}
	after := s.snapshot(due)
	assert.Equal(t, before, after)
}

// testReplayOfChangedDefinitions: jobs defined three times (the schedule
// changed, then the target) and some deleted; a replay of the whole topic by
// another group answers the older definitions STALE, the last UNCHANGED
// (deletes DELETED again), and leaves every job at its last record's
// revision with only that definition's entry pending.
func testReplayOfChangedDefinitions(t *testing.T, s *stack) {
	const n = 200
	s.startRegistry("registry")
	id := func(i int) string { return fmt.Sprintf("team.changed-%03d", i) }
	var v1, v2, v3, dels []*kgo.Record
	for i := range n {
		v1 = append(v1, jobRecord(t, cronSpec(id(i), "0 3 * * *"), sundialv1.EncodingProtobuf))
		v2 = append(v2, jobRecord(t, cronSpec(id(i), "0 4 * * *"), sundialv1.EncodingProtobuf))
		spec := cronSpec(id(i), "0 4 * * *")
		spec.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "other"}}}
		v3 = append(v3, jobRecord(t, spec, sundialv1.EncodingJSON))
		if i%10 == 0 {
			dels = append(dels, &kgo.Record{Key: []byte(id(i))})
		}
	}
	all := slices.Concat(v1, v2, v3, dels)
	s.produce(all...)
	first := s.statuses.wait(t, 1, all...)
	outcomes := func(answers []answer, from, to int) map[sundialv1.DefinitionOutcome]int {
		m := map[sundialv1.DefinitionOutcome]int{}
		for _, a := range answers[from:to] {
			m[a.status.GetOutcome()]++
		}
		return m
	}
	assert.Equal(t, map[sundialv1.DefinitionOutcome]int{sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED: n}, outcomes(first, 0, n))
	assert.Equal(t, map[sundialv1.DefinitionOutcome]int{sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED: n}, outcomes(first, n, 2*n))
	assert.Equal(t, map[sundialv1.DefinitionOutcome]int{sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED: n}, outcomes(first, 2*n, 3*n))
	due3 := first[2*n].status.GetNextDueTime().AsTime()
	due1 := first[0].status.GetNextDueTime().AsTime()
	require.NotEqual(t, due1, due3)

	check := func(when string) {
		t.Helper()
		for i := range n {
			job, err := s.store.GetJob(t.Context(), id(i))
			require.NoError(t, err, when)
			assert.Empty(t, s.dueEntries(id(i), due1), "%s: %s: the first definition's entry is gone", when, id(i))
			if i%10 == 0 {
				assert.True(t, job.Deleted, "%s: %s", when, id(i))
				assert.Equal(t, dels[i/10].Offset, job.Revision, "%s: %s", when, id(i))
				assert.Empty(t, s.dueEntries(id(i), due3), "%s: %s: deleted, nothing pending", when, id(i))
				continue
			}
			assert.False(t, job.Deleted, "%s: %s", when, id(i))
			assert.Equal(t, v3[i].Offset, job.Revision, "%s: %s at its last record", when, id(i))
			entries := s.dueEntries(id(i), due3)
			require.Len(t, entries, 1, "%s: %s", when, id(i))
			assert.Equal(t, v3[i].Offset, entries[0].Revision, "%s: %s: the pending entry is the last definition's", when, id(i))
		}
	}
	check("after the first pass")

	s.startRegistry("replay")
	replayed := s.statuses.wait(t, 2, all...)
	stale := sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE
	for i := range n {
		assert.Equal(t, stale, replayed[i].status.GetOutcome(), "v1 of %s", id(i))
		assert.Equal(t, stale, replayed[n+i].status.GetOutcome(), "v2 of %s", id(i))
		want := sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED
		if i%10 == 0 {
			want = stale // the delete came after it
		}
		assert.Equal(t, want, replayed[2*n+i].status.GetOutcome(), "v3 of %s", id(i))
	}
	for i := range dels {
		assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, replayed[3*n+i].status.GetOutcome())
	}
	check("after the replay")
}

// snapshot is the state a replay must not change: the due entries of a
// bucket of the jobs named job-*, and their job rows. (Other tests share the
// keyspace, and may have entries in the same bucket.)
type snapshot struct {
	entries []store.DueEntry
	jobs    map[string]store.Job
}

func (s *stack) snapshot(due time.Time) snapshot {
	s.t.Helper()
	snap := snapshot{jobs: map[string]store.Job{}}
	for shard := range shards {
		for e, err := range s.store.ListBucket(s.t.Context(), store.BucketOf(due), shard) {
			require.NoError(s.t, err)
			if !strings.HasPrefix(e.JobID, "team.job-") {
				continue
			}
			snap.entries = append(snap.entries, e)
			job, err := s.store.GetJob(s.t.Context(), e.JobID)
			require.NoError(s.t, err)
			snap.jobs[e.JobID] = job
		}
	}
	return snap
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// testDefinitionLifecycle walks one job through change, pause, resume,
// revisions and delete, checking the pending entry after every step.
func testDefinitionLifecycle(t *testing.T, s *stack) {
	s.startRegistry("registry")
	const id = "payments.settle"

	step := func(rec *kgo.Record) *sundialv1.JobStatus {
		t.Helper()
		s.produce(rec)
		return s.statuses.wait(t, 1, rec)[0].status
	}
	nextDue := func(st *sundialv1.JobStatus) time.Time {
		t.Helper()
		require.NotNil(t, st.GetNextDueTime(), "status %v", st)
		return st.GetNextDueTime().AsTime()
	}

	created := step(jobRecord(t, cronSpec(id, "0 3 * * *"), sundialv1.EncodingJSON))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, created.GetOutcome())
	d1 := nextDue(created)
	require.Len(t, s.dueEntries(id, d1), 1)

	// A changed schedule replaces the pending entry.
	changed := cronSpec(id, "0 4 * * *")
	updated := step(jobRecord(t, changed, sundialv1.EncodingProtobuf))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, updated.GetOutcome())
	d2 := nextDue(updated)
	assert.Equal(t, 4, d2.Hour())
	assert.Empty(t, s.dueEntries(id, d1), "the old entry is gone")
	entries := s.dueEntries(id, d2)
	require.Len(t, entries, 1)
	assert.Equal(t, updated.GetSource().GetOffset(), entries[0].Revision)
	assert.Equal(t, store.RunID(id, d2), entries[0].RunID)

	// Resending the same definition changes nothing.
	same := step(jobRecord(t, changed, sundialv1.EncodingJSON))
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED, same.GetOutcome())
	assert.Equal(t, d2, nextDue(same))
	assert.Len(t, s.dueEntries(id, d2), 1)

	// Paused: stored, nothing scheduled.
	paused := proto.Clone(changed).(*sundialv1.JobSpec)
	paused.Paused = true
	st := step(jobRecord(t, paused, sundialv1.EncodingProtobuf))
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, st.GetOutcome())
	assert.Nil(t, st.GetNextDueTime())
	assert.Empty(t, s.dueEntries(id, d2))
	job, err := s.store.GetJob(t.Context(), id)
	require.NoError(t, err)
	assert.True(t, job.NextDue.IsZero())

	// Resumed: the next occurrence is scheduled again.
	resumed := step(jobRecord(t, changed, sundialv1.EncodingProtobuf))
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, resumed.GetOutcome())
	assert.Equal(t, d2, nextDue(resumed))
	require.Len(t, s.dueEntries(id, d2), 1)
	assert.Equal(t, resumed.GetSource().GetOffset(), s.dueEntries(id, d2)[0].Revision)

	// Producer revisions: a lower one is rejected naming "revision", and so
	// is the same one with another definition.
	v5 := proto.Clone(changed).(*sundialv1.JobSpec)
	v5.Revision = proto.Uint64(5)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, step(jobRecord(t, v5, sundialv1.EncodingJSON)).GetOutcome())
	v3 := proto.Clone(v5).(*sundialv1.JobSpec)
	v3.Revision = proto.Uint64(3)
	v3.Description = "older"
	st = step(jobRecord(t, v3, sundialv1.EncodingJSON))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, st.GetOutcome())
	assert.Equal(t, "revision", st.GetErrors()[0].GetField())
	assert.Contains(t, st.GetErrors()[0].GetReason(), "3 is lower than the revision in force, 5")
	assert.Equal(t, uint64(3), st.GetRevision())
	v5b := proto.Clone(v5).(*sundialv1.JobSpec)
	v5b.Description = "different"
	st = step(jobRecord(t, v5b, sundialv1.EncodingJSON))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, st.GetOutcome())
	assert.Equal(t, "revision", st.GetErrors()[0].GetField())

	// A tombstone deletes the job and its pending entry; deleting again is
	// DELETED too.
	for range 2 {
		st = step(&kgo.Record{Key: []byte(id)})
		assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, st.GetOutcome())
		assert.True(t, st.GetAccepted())
		assert.Empty(t, s.dueEntries(id, d2))
		job, err := s.store.GetJob(t.Context(), id)
		require.NoError(t, err)
		assert.True(t, job.Deleted)
	}

	// A DAG definition is left to the DAG engine: no answer, and the next
	// record of the same key (processed after it) is answered.
	dag := &kgo.Record{Key: []byte("reports.etl"), Value: []byte("not a JobSpec"), Headers: []kgo.RecordHeader{{Key: "sundial-kind", Value: []byte("dag")}}}
	s.produce(dag)
	st = step(&kgo.Record{Key: []byte("reports.etl")})
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, st.GetOutcome())
	assert.Zero(t, s.statuses.count(dag))
}

// flakyStore fails the first calls of every kind, as a Cassandra timeout
// would. It counts what the registry must retry: every job carried by a
// failed UpsertJobs call (the registry batches concurrent upserts, so one
// failed call fails each job in it) and every failed DeleteJob, whether the
// failure was injected or came from the real store; and apart, every id
// carried by a failed GetJobs call (the registry batches its reads too).
type flakyStore struct {
	registry.Store
	failures atomic.Int64
	// failedJobs counts job writes that failed as a whole call.
	failedJobs atomic.Int64
	// realFailures counts calls the real store failed.
	realFailures atomic.Int64
	// readFailures is how many GetJobs calls to fail first; failedReads
	// counts the ids of the GetJobs calls that failed.
	readFailures, failedReads atomic.Int64
}

func (f *flakyStore) GetJobs(ctx context.Context, ids []string) (map[string]store.Job, error) {
	if f.readFailures.Add(-1) >= 0 {
		f.failedReads.Add(int64(len(ids)))
		return nil, errTimeout
	}
	jobs, err := f.Store.GetJobs(ctx, ids)
	if err != nil {
		f.failedReads.Add(int64(len(ids)))
	}
	return jobs, err
}

var errTimeout = errors.New("gocql: timeout (injected)")

func (f *flakyStore) fail() bool { return f.failures.Add(-1) >= 0 }

func (f *flakyStore) UpsertJobs(ctx context.Context, jobs []store.Job) ([]store.UpsertResult, error) {
	results, err := f.upsertJobs(ctx, jobs)
	if err != nil {
		f.failedJobs.Add(int64(len(jobs)))
	}
	return results, err
}

func (f *flakyStore) upsertJobs(ctx context.Context, jobs []store.Job) ([]store.UpsertResult, error) {
	if f.fail() {
		return nil, errTimeout
	}
	var rest []store.Job
	for _, job := range jobs {
		if job.ID != "team.refused" {
			rest = append(rest, job)
		}
	}
	results, err := f.Store.UpsertJobs(ctx, rest)
	if err != nil {
		f.realFailures.Add(1)
		return nil, err
	}
	out := make([]store.UpsertResult, 0, len(jobs))
	for _, job := range jobs {
		if job.ID == "team.refused" {
			out = append(out, store.UpsertResult{Err: fmt.Errorf("upsert job: %w: the store cannot hold it", store.ErrInvalid)})
			continue
		}
		out, results = append(out, results[0]), results[1:]
	}
	return out, nil
}

func (f *flakyStore) DeleteJob(ctx context.Context, id string, rev int64, at time.Time) (store.Outcome, error) {
	if f.fail() {
		f.failedJobs.Add(1)
		return 0, errTimeout
	}
	outcome, err := f.Store.DeleteJob(ctx, id, rev, at)
	if err != nil {
		f.failedJobs.Add(1)
		f.realFailures.Add(1)
	}
	return outcome, err
}

// testTransientErrorsAreRetried: store errors are retried until they pass,
// never turned into rejections; a store that refuses a record as invalid
// gets it rejected instead of retried forever.
func testTransientErrorsAreRetried(t *testing.T, s *stack) {
	flaky := &flakyStore{Store: s.store}
	flaky.failures.Store(5)
	flaky.readFailures.Store(3)
	_, metrics := s.startRegistry("registry", func(c *registry.Config) { c.Store = flaky })

	recs := s.produce(
		jobRecord(t, cronSpec("team.a", "0 3 * * *"), sundialv1.EncodingJSON),
		&kgo.Record{Key: []byte("team.b")},
		jobRecord(t, cronSpec("team.refused", "0 3 * * *"), sundialv1.EncodingJSON),
	)
	answers := s.statuses.wait(t, 1, recs...)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, answers[0].status.GetOutcome())
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, answers[1].status.GetOutcome())
	refused := answers[2].status
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, refused.GetOutcome())
	assert.Equal(t, "record", refused.GetErrors()[0].GetField())
	assert.Contains(t, refused.GetErrors()[0].GetReason(), "the store cannot hold it")
	upserts := counter(t, metrics, "sundial_registry_retries_total", "op", "upsert_job")
	deletes := counter(t, metrics, "sundial_registry_retries_total", "op", "delete_job")
	failed := flaky.failedJobs.Load()
	t.Logf("retries: upsert_job %v, delete_job %v; job writes whose store call failed %d (5 calls injected, %d failed by the real store)",
		upserts, deletes, failed, flaky.realFailures.Load())
	// Each failed call is retried once for every job it carried, however
	// the concurrent upserts happened to be batched.
	assert.Equal(t, float64(failed), upserts+deletes, "one retry for every job write whose store call failed")
	assert.GreaterOrEqual(t, failed, int64(5), "the 5 injected failures all reached the registry")
	reads := counter(t, metrics, "sundial_registry_retries_total", "op", "get_job")
	t.Logf("retries: get_job %v; ids whose read failed %d (3 calls injected)", reads, flaky.failedReads.Load())
	assert.Equal(t, float64(flaky.failedReads.Load()), reads, "one retry for every id whose grouped read failed")
	assert.GreaterOrEqual(t, flaky.failedReads.Load(), int64(3), "the 3 injected read failures all reached the registry")
	assert.Equal(t, float64(1), counter(t, metrics, "sundial_registry_records_total", "outcome", "rejected"))
}

// testRegistrationRate registers many definitions and reports the rate.
// SUNDIAL_REGISTRY_RATE_DEFINITIONS sets how many (default 5,000),
// SUNDIAL_REGISTRY_RATE_CONCURRENCY how many jobs at once (default
// registry.DefaultConcurrency).
func testRegistrationRate(t *testing.T, s *stack) {
	n := 5000
	if v := os.Getenv("SUNDIAL_REGISTRY_RATE_DEFINITIONS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		spec := cronSpec(fmt.Sprintf("team.rate-%07d", i), fmt.Sprintf("%d %d * * *", i%60, i/60%24))
		recs[i] = jobRecord(t, spec, sundialv1.EncodingProtobuf)
	}
	produced := time.Now()
	s.produce(recs...)
	t.Logf("produced %d definitions in %s", n, time.Since(produced).Round(time.Millisecond))

	concurrency := registry.DefaultConcurrency
	if v := os.Getenv("SUNDIAL_REGISTRY_RATE_CONCURRENCY"); v != "" {
		var err error
		concurrency, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	start := time.Now()
	s.startRegistry("registry", func(c *registry.Config) { c.Concurrency = concurrency })
	answers := s.statuses.wait(t, 1, recs...)
	elapsed := time.Since(start)
	for _, a := range answers {
		require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, a.status.GetOutcome(), "%v", a.status.GetErrors())
	}
	rate := float64(n) / elapsed.Seconds()
	t.Logf("registered %d definitions in %s: %.0f definitions/s (Kafka %v, Cassandra store, %d jobs at once)",
		n, elapsed.Round(time.Millisecond), rate, strings.Join(s.brokers, ","), concurrency)

	// Baseline in the same run, as the bench's C baseline: plain writes of due entries, the
	// cheapest thing a definition costs the store, with the same fan-out.
	// A registered definition costs a read, its first occurrence (in a batch
	// per partition), its row (in a batch of many jobs' rows), a status and
	// (when due soon) a wake-up.
	entries := make([]store.DueEntry, n)
	base := time.Now().Add(24 * time.Hour).Truncate(time.Minute)
	for i := range entries {
		id := fmt.Sprintf("team.baseline-%07d", i)
		due := base.Add(time.Duration(i%60) * time.Second)
		entries[i] = store.DueEntry{Due: due, JobID: id, Kind: store.KindScheduled, RunID: store.RunID(id, due), Attempt: 1}
	}
	g, gctx := errgroup.WithContext(t.Context())
	g.SetLimit(64)
	start = time.Now()
	for _, e := range entries {
		g.Go(func() error { return s.store.PutDue(gctx, e) })
	}
	require.NoError(t, g.Wait())
	baseline := float64(n) / time.Since(start).Seconds()
	t.Logf("baseline C: %.0f single due-entry writes/s; registration runs at %.2f of C", baseline, rate/baseline)
}
