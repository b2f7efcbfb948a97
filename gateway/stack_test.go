package gateway_test

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/gateway"
	"github.com/sundialhq/sundial/internal/connect/testpki"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/logtail/logtailtest"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/worker"
)

// waitFor bounds the waits of these tests: generous, the machine is shared.
const waitFor = 3 * time.Minute

// tokenAuth is the tests' Authenticator: a token "TEAM:ROLE" is a member of
// TEAM with ROLE, "admin" the cluster admin.
type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, bearer string) (auth.Principal, error) {
	if bearer == "admin" {
		return auth.Principal{Subject: "token:admin", ClusterAdmin: true}, nil
	}
	team, roleName, ok := strings.Cut(bearer, ":")
	role, err := auth.ParseRole(roleName)
	if !ok || team == "" || err != nil {
		return auth.Principal{}, auth.Refuse(auth.ReasonUnknown, "unknown token")
	}
	return auth.Principal{Subject: "token:" + bearer, Team: team, Role: role}, nil
}

// stack is a stock runner, a gateway (its runner, broker and API) and what
// the tests read, on the local stack's Kafka and Redis.
type stack struct {
	t      *testing.T
	names  topics.Names
	client *kgo.Client
	events *eventLog
	apiURL string
	// redis and runnerKeys are the runners' Redis and key prefix, for the
	// operator's signals.
	redis      redis.UniversalClient
	runnerKeys string
	// kafka, redisAddr and redisKeys are the test's backends, for the
	// processes it starts.
	kafka     testenv.Kafka
	redisAddr string
	redisKeys string
}

func setup(t *testing.T) *stack { t.Helper(); return setupWith(t, stackOpts{}) }

// stackOpts change setup's stack.
type stackOpts struct {
	// handlers are compiled into the stock runner.
	handlers map[string]target.Handler
	// pki, when set, makes the API serve TLS only, with its server
	// certificate.
	pki *testpki.PKI
	// noGateway leaves the gateway and the API out: the test runs them
	// (in a process of their own, process_test.go).
	noGateway bool
	// gatewayConcurrency is the gateway runner's Concurrency; 0 is 64.
	gatewayConcurrency int
	// tails, when set, makes the API serve the RunService too, whose
	// TailRunLog tails the runs of these jobs (live tails only).
	tails []*sundialv1.JobSpec
}

func setupWith(t *testing.T, opts stackOpts) *stack {
	t.Helper()
	kr := testenv.NeedKafkaRedis(t, 4)
	k, rd, names, cl, rdb := kr.Kafka, kr.Redis, kr.Names, kr.Client, kr.RDB
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	enq := &enqueuer{cl: cl, names: names, stop: make(chan struct{})}
	t.Cleanup(enq.close)
	s := &stack{t: t, names: names, client: cl, events: newEventLog(t, k.Brokers, names), redis: rdb, runnerKeys: rd.KeyPrefix + runner.DefaultKeyPrefix}
	backends := assemble.RunnerBackends{Redis: rdb, RedisKeyPrefix: rd.KeyPrefix, Enqueuer: enq}
	base := func(id string) runner.Config {
		return runner.Config{
			ID: id, Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Concurrency: 64,
			AnnounceInterval: 300 * time.Millisecond, RouteDelay: 300 * time.Millisecond, CommitInterval: 100 * time.Millisecond,
			Registerer: prometheus.NewRegistry(),
		}
	}
	stockCfg := base("stock-1")
	stockCfg.Handlers = opts.handlers
	stock, err := assemble.Runner(ctx, stockCfg, backends)
	require.NoError(t, err)
	require.NoError(t, stock.Start(ctx))
	t.Cleanup(stock.Stop)
	s.kafka, s.redisAddr, s.redisKeys = k, rd.Addr, rd.KeyPrefix
	if opts.noGateway {
		return s
	}

	// A worker is lost after 15 s without a heartbeat: long enough for a
	// busy CI machine (under -race) not to lose a live one, which would run
	// its attempt twice and fail the exactly-once assertions.
	broker, err := gateway.New(gateway.Config{HeartbeatInterval: time.Second, LostAfter: 15})
	require.NoError(t, err)
	gwCfg := base("gateway-1")
	gwCfg.Concurrency = cmp.Or(opts.gatewayConcurrency, 64) // each attempt waits on a worker's round trips
	gw, err := assemble.Gateway(ctx, gwCfg, backends, broker)
	require.NoError(t, err)
	require.NoError(t, gw.Start(ctx))
	t.Cleanup(gw.Stop)
	acfg := apiserver.Config{Addr: "127.0.0.1:0", Authenticator: tokenAuth{},
		Services: []apiserver.Service{gateway.NewService(broker).Service()}}
	if opts.tails != nil {
		acfg.Services = append(acfg.Services, logtailtest.RunService(t, rdb, s.runnerKeys, opts.tails...))
	}
	scheme := "http://"
	if opts.pki != nil {
		acfg.TLSCertFile, acfg.TLSKeyFile, scheme = opts.pki.ServerCert, opts.pki.ServerKey, "https://"
	}
	srv, err := apiserver.New(acfg)
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	s.apiURL = scheme + srv.Addr().String()
	return s
}

// handlerRun is a run of team's job whose target is the handler.
func handlerRun(team, job, handler string, due time.Time) *sundialv1.Run {
	due = store.Truncate(due)
	return &sundialv1.Run{
		RunId: store.RunID(job, due), JobId: job, OwnerTeam: team, DueTime: timestamppb.New(due), AttemptDueTime: timestamppb.New(due),
		Attempt: 1, Priority: sundialv1.Priority_PRIORITY_DEFAULT, Origin: sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE,
		Target:  &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}},
		Timeout: durationpb.New(2 * time.Minute),
		Retry:   &sundialv1.RetryPolicy{MaxAttempts: 5, InitialBackoff: durationpb.New(100 * time.Millisecond), MaxBackoff: durationpb.New(time.Second)},
	}
}

func (s *stack) produce(runs ...*sundialv1.Run) {
	s.t.Helper()
	var recs []*kgo.Record
	for _, r := range runs {
		val, err := proto.Marshal(r)
		require.NoError(s.t, err)
		recs = append(recs, &kgo.Record{Topic: s.names.Runs(topics.PriorityDefault), Key: []byte(r.GetJobId()), Value: val})
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(s.t, s.client.ProduceSync(ctx, recs...).FirstErr())
}

// startWorker starts a team's SDK worker on the gateway with handlers.
func (s *stack) startWorker(id, team string, client *http.Client, handlers map[string]worker.Handler) {
	s.t.Helper()
	s.startWorkerWith(worker.Config{APIURL: s.apiURL, Token: team + ":operator", ID: id, Concurrency: 8, HTTPClient: client}, handlers)
}

func (s *stack) startWorkerWith(cfg worker.Config, handlers map[string]worker.Handler) {
	s.t.Helper()
	w, err := worker.New(cfg)
	require.NoError(s.t, err)
	for name, h := range handlers {
		w.Handle(name, h)
	}
	require.NoError(s.t, w.Start(context.Background()))
	s.t.Cleanup(w.Stop)
}

// effects counts each run's effects, keyed by run id, and where they ran.
type effects struct {
	mu   sync.Mutex
	byID map[string][]string // run id -> "worker/team"
	rep  map[string]bool
}

func newEffects() *effects { return &effects{byID: map[string][]string{}, rep: map[string]bool{}} }

func (e *effects) handler(where string) worker.Handler {
	return func(_ context.Context, r *worker.Run) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.byID[r.ID] = append(e.byID[r.ID], where)
		e.rep[r.ID] = r.Replay
		r.Log.Info("effect applied", "where", where)
		return nil
	}
}

func (e *effects) of(runID string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.byID[runID]...)
}

func TestTeamWorkersRunTheirOwnTeamsHandlersOnce(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fx := newEffects()
	s.startWorker("a-1", "team-a", nil, map[string]worker.Handler{"a.work": fx.handler("a-1/team-a"), "shared": fx.handler("a-1/team-a")})
	s.startWorker("a-2", "team-a", nil, map[string]worker.Handler{"a.work": fx.handler("a-2/team-a"), "shared": fx.handler("a-2/team-a")})
	s.startWorker("b-1", "team-b", nil, map[string]worker.Handler{"b.work": fx.handler("b-1/team-b"), "shared": fx.handler("b-1/team-b")})

	due := time.Now()
	var runs []*sundialv1.Run
	for i := range 5 {
		at := due.Add(time.Duration(i) * time.Second)
		runs = append(runs,
			handlerRun("team-a", "a-job", "a.work", at), handlerRun("team-b", "b-job", "b.work", at),
			handlerRun("team-a", "a-shared", "shared", at), handlerRun("team-b", "b-shared", "shared", at))
	}
	// Team a has no worker serving b.work: its run waits, as no_worker.
	orphan := handlerRun("team-a", "a-orphan", "b.work", due)
	s.produce(append(runs, orphan)...)

	for _, r := range runs {
		s.events.waitState(t, r.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
	}
	for _, r := range runs {
		got := fx.of(r.GetRunId())
		require.Len(t, got, 1, "run %s executed %v", r.GetRunId(), got)
		require.True(t, strings.HasSuffix(got[0], "/"+r.GetOwnerTeam()), "run %s of %s executed on %s", r.GetRunId(), r.GetOwnerTeam(), got[0])
	}
	s.events.waitReason(t, orphan.GetRunId(), sundialv1.RunState_RUN_STATE_DEFERRED, "no_worker")
	require.Empty(t, fx.of(orphan.GetRunId()), "team b's worker executed team a's run")
	for _, ev := range s.events.of(orphan.GetRunId()) {
		require.NotEqual(t, sundialv1.RunState_RUN_STATE_DEAD, ev.GetState(), "a run without a worker is dead-lettered")
	}
}

// TestWorkersOfOnePoolReceiveOnlyThatPoolsRuns: two workers of one team
// serve the same handler in different pools; each pool's job runs on its
// pool's worker only, and a job of a pool no worker serves waits as
// no_worker, the event naming the pool.
func TestWorkersOfOnePoolReceiveOnlyThatPoolsRuns(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fx := newEffects()
	for _, pool := range []string{"blue", "green"} {
		s.startWorkerWith(worker.Config{APIURL: s.apiURL, Token: "team-a:operator", ID: pool + "-1", Pool: pool, Concurrency: 4},
			map[string]worker.Handler{"work": fx.handler(pool)})
	}
	due := time.Now()
	var runs []*sundialv1.Run
	for i := range 4 {
		for _, pool := range []string{"blue", "green"} {
			r := handlerRun("team-a", pool+"-job", "work", due.Add(time.Duration(i)*time.Second))
			r.Pool = pool
			runs = append(runs, r)
		}
	}
	orphan := handlerRun("team-a", "red-job", "work", due)
	orphan.Pool = "red"
	s.produce(append(runs, orphan)...)

	for _, r := range runs {
		s.events.waitState(t, r.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
	}
	for _, r := range runs {
		require.Equal(t, []string{r.GetPool()}, fx.of(r.GetRunId()), "run %s of pool %s", r.GetRunId(), r.GetPool())
	}
	s.events.waitReason(t, orphan.GetRunId(), sundialv1.RunState_RUN_STATE_DEFERRED, "no_worker")
	require.Empty(t, fx.of(orphan.GetRunId()), "a worker of another pool executed the red job's run")
	var why string
	for _, ev := range s.events.of(orphan.GetRunId()) {
		if ev.GetState() == sundialv1.RunState_RUN_STATE_DEFERRED {
			why = ev.GetError().GetMessage()
		}
	}
	require.Equal(t, "no live worker of team team-a serves handler work in pool red", why)
}

// cuttable is a transport that fails every call once cut: from the
// gateway's side, a worker process killed mid-run.
type cuttable struct {
	cut  atomic.Bool
	next http.RoundTripper
}

func (c *cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("worker killed")
	}
	return c.next.RoundTrip(r)
}

func TestLostWorkerRunIsRedoneOnceOnAnotherWorkerOfTheTeam(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fx := newEffects()
	started := make(chan string, 1)
	tr := &cuttable{next: http.DefaultTransport.(*http.Transport).Clone()}
	s.startWorker("doomed", "team-a", &http.Client{Transport: tr}, map[string]worker.Handler{"a.work": func(ctx context.Context, r *worker.Run) error {
		started <- r.ID
		<-ctx.Done() // killed before its effect
		return ctx.Err()
	}})
	run := handlerRun("team-a", "a-job", "a.work", time.Now())
	s.produce(run)
	select {
	case id := <-started:
		require.Equal(t, run.GetRunId(), id)
	case <-time.After(waitFor):
		t.Fatal("the doomed worker never received the run")
	}
	tr.cut.Store(true)
	s.startWorker("heir", "team-a", nil, map[string]worker.Handler{"a.work": fx.handler("heir/team-a")})

	s.events.waitState(t, run.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
	require.Equal(t, []string{"heir/team-a"}, fx.of(run.GetRunId()))
	fx.mu.Lock()
	require.True(t, fx.rep[run.GetRunId()], "the redone run is not answered as a replay")
	fx.mu.Unlock()
	var lost bool
	for _, ev := range s.events.of(run.GetRunId()) {
		lost = lost || ev.GetError().GetCode() == gateway.CodeWorkerLost
	}
	require.True(t, lost, "no attempt failed as worker_lost")
}

// enqueuer stands in for package enqueue and the dispatcher: at its due
// time it produces the run a retry or deferral carries.
type enqueuer struct {
	cl    *kgo.Client
	names topics.Names
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func (e *enqueuer) Enqueue(_ context.Context, entries ...store.DueEntry) error {
	for _, en := range entries {
		run := &sundialv1.Run{}
		if err := proto.Unmarshal(en.Payload, run); err != nil {
			return err
		}
		e.wg.Go(func() { //nolint:contextcheck // a due entry outlives the call, as the dispatcher's does
			select {
			case <-time.After(time.Until(en.Due)):
			case <-e.stop:
				return
			}
			val, _ := proto.Marshal(run)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				select {
				case <-e.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			_ = e.cl.ProduceSync(ctx, &kgo.Record{Topic: e.names.Runs(topics.PriorityDefault), Key: []byte(run.GetJobId()), Value: val}).FirstErr()
		})
	}
	return nil
}

func (e *enqueuer) close() {
	e.once.Do(func() { close(e.stop) })
	e.wg.Wait()
}

// eventLog reads sundial.events.
type eventLog struct {
	mu    sync.Mutex
	byRun map[string][]*sundialv1.RunEvent
}

func newEventLog(t *testing.T, brokers []string, names topics.Names) *eventLog {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(names.Events()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	l := &eventLog{byRun: map[string][]*sundialv1.RunEvent{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				ev := &sundialv1.RunEvent{}
				if proto.Unmarshal(r.Value, ev) != nil {
					return
				}
				l.mu.Lock()
				l.byRun[ev.GetRunId()] = append(l.byRun[ev.GetRunId()], ev)
				l.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return l
}

func (l *eventLog) of(runID string) []*sundialv1.RunEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*sundialv1.RunEvent(nil), l.byRun[runID]...)
}

func (l *eventLog) waitReason(t *testing.T, runID string, state sundialv1.RunState, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, ev := range l.of(runID) {
			if ev.GetState() == state && (reason == "" || ev.GetReason() == reason) {
				return true
			}
		}
		return false
	}, waitFor, 50*time.Millisecond, "run %s never reached %s %s", runID, state, reason)
}

func (l *eventLog) waitState(t *testing.T, runID string, state sundialv1.RunState) {
	t.Helper()
	l.waitReason(t, runID, state, "")
}

// TestWorkerReachesATLSOnlyAPIWithItsToken: a worker given the API's https
// address, the CA of its certificate and its team's token, and nothing
// else, executes its team's run.
func TestWorkerReachesATLSOnlyAPIWithItsToken(t *testing.T) {
	t.Parallel()
	pki := testpki.New(t)
	s := setupWith(t, stackOpts{pki: &pki})
	require.True(t, strings.HasPrefix(s.apiURL, "https://"))
	fx := newEffects()
	s.startWorkerWith(worker.Config{APIURL: s.apiURL, Token: "team-a:operator", TLSCAFile: pki.CA, ID: "tls-1"},
		map[string]worker.Handler{"a.work": fx.handler("tls-1/team-a")})
	run := handlerRun("team-a", "a-job", "a.work", time.Now())
	s.produce(run)
	s.events.waitState(t, run.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
	require.Equal(t, []string{"tls-1/team-a"}, fx.of(run.GetRunId()))
}

// TestCancelReachesTheWorkerThroughItsHeartbeat: an operator's cancel of a
// run executing on a team's worker ends the handler's context (the
// gateway answers the worker's next heartbeat "stop"), and the run is
// CANCELLED, not retried.
func TestCancelReachesTheWorkerThroughItsHeartbeat(t *testing.T) {
	t.Parallel()
	s := setup(t)
	started, stopped := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	s.startWorker("a-1", "team-a", nil, map[string]worker.Handler{"a.work": func(ctx context.Context, _ *worker.Run) error {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-ctx.Done()
		close(stopped)
		return ctx.Err()
	}})
	run := handlerRun("team-a", "a-job", "a.work", time.Now())
	s.produce(run)
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("the worker never received the run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, runner.SignalCancel(ctx, s.redis, s.runnerKeys, run.GetJobId(), run.GetRunId()))
	select {
	case <-stopped:
	case <-time.After(waitFor):
		t.Fatal("the handler's context never ended")
	}
	s.events.waitState(t, run.GetRunId(), sundialv1.RunState_RUN_STATE_CANCELLED)
	require.Equal(t, int32(1), calls.Load(), "a cancelled run executed again")
}
