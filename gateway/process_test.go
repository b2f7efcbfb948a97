package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/gateway"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/worker"
)

// processEnv carries, as JSON, the processConfig of a process the test
// binary runs instead of the tests (TestMain): a team's worker, or a
// gateway with its API. Tests SIGKILL these processes, as a crash would.
const processEnv = "SUNDIAL_GATEWAY_TEST_PROCESS"

type processConfig struct {
	// Role is "worker" or "gateway".
	Role string
	// A worker's: the API, its team's token, its id, and the file its
	// handler "a.work" appends a line to when it starts an attempt
	// ("started RUN WORKER REPLAY") and when it applies the run's effect
	// ("effect RUN WORKER REPLAY"). A worker with Block never applies it:
	// its handler waits until its context ends.
	APIURL, Token, ID, Effects string
	Block                      bool
	// A gateway's: the backends, its runner's id and the API's address.
	Brokers                             []string
	TopicPrefix, RedisAddr, RedisPrefix string
	Addr                                string
}

// processMain runs the process raw configures until SIGTERM or SIGINT and
// returns its exit code.
func processMain(raw string) int {
	var c processConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", processEnv, err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("process", c.ID)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch c.Role {
	case "worker":
		err = workerProcess(ctx, c, logger)
	case "gateway":
		err = gatewayProcess(ctx, c, logger)
	default:
		err = fmt.Errorf("role %q: want worker or gateway", c.Role)
	}
	if err != nil {
		logger.Error("process failed", "err", err)
		return 1
	}
	return 0
}

func workerProcess(ctx context.Context, c processConfig, logger *slog.Logger) error {
	f, err := os.OpenFile(c.Effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	var mu sync.Mutex
	note := func(what string, r *worker.Run) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(f, "%s %s %s %t\n", what, r.ID, c.ID, r.Replay)
		return err
	}
	w, err := worker.New(worker.Config{APIURL: c.APIURL, Token: c.Token, ID: c.ID, Concurrency: 4, Logger: logger})
	if err != nil {
		return err
	}
	w.Handle("a.work", func(ctx context.Context, r *worker.Run) error {
		if err := note("started", r); err != nil {
			return err
		}
		if c.Block {
			<-ctx.Done()
			return ctx.Err()
		}
		return note("effect", r)
	})
	return w.Run(ctx)
}

func gatewayProcess(ctx context.Context, c processConfig, logger *slog.Logger) error {
	names := topics.Names{Prefix: c.TopicPrefix}
	rdb := redis.NewClient(&redis.Options{Addr: c.RedisAddr})
	defer rdb.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	enq := &enqueuer{cl: cl, names: names, stop: make(chan struct{})}
	defer enq.close()
	broker, err := gateway.New(gateway.Config{HeartbeatInterval: time.Second, LostAfter: 15, Logger: logger})
	if err != nil {
		return err
	}
	gw, err := assemble.Gateway(ctx, runner.Config{
		ID: c.ID, Kafka: []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID(c.ID)}, Topics: names, Concurrency: 64,
		AnnounceInterval: 300 * time.Millisecond, RouteDelay: 300 * time.Millisecond, CommitInterval: 100 * time.Millisecond,
		Registerer: prometheus.NewRegistry(), Logger: logger,
	}, assemble.RunnerBackends{Redis: rdb, RedisKeyPrefix: c.RedisPrefix, Enqueuer: enq, LeaseTTL: 5 * time.Second}, broker)
	if err != nil {
		return err
	}
	if err := gw.Start(ctx); err != nil {
		return err
	}
	defer gw.Stop()
	srv, err := apiserver.New(apiserver.Config{Addr: c.Addr, Authenticator: tokenAuth{},
		Services: []apiserver.Service{gateway.NewService(broker).Service()}})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer srv.Stop()
	logger.Info("gateway process serving", "addr", srv.Addr().String(), "pid", os.Getpid())
	<-ctx.Done()
	return nil
}

// process is a child process the test started.
type process struct {
	cmd *exec.Cmd
	log string
}

// startProcess starts the test binary as the process c configures; it is
// killed when the test ends, and its log printed if the test failed.
func startProcess(t *testing.T, c processConfig) *process {
	t.Helper()
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	log := filepath.Join(t.TempDir(), c.ID+".log")
	out, err := os.Create(log)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), processEnv+"="+string(raw))
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, log: log}
	t.Cleanup(func() {
		p.kill()
		_ = out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("log of process %s:\n%s", c.ID, b)
		}
	})
	return p
}

// kill SIGKILLs the process and reaps it.
func (p *process) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// effectLines reads the worker processes' effects file: the lines of
// what ("started", "effect") per run id.
func effectLines(t *testing.T, path, what string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 4 && fields[0] == what {
			out[fields[1]] = append(out[fields[1]], fields[2]+" replay="+fields[3])
		}
	}
	return out
}

// TestWorkerProcessKilledMidRunIsRedoneOnceAsAReplay: a worker process
// SIGKILLed while its handler executes a run: the gateway declares it lost,
// the attempt fails as worker_lost and is retried on another worker
// process of the same team, answered as a replay; the run's effect is
// applied once.
func TestWorkerProcessKilledMidRunIsRedoneOnceAsAReplay(t *testing.T) {
	t.Parallel()
	s := setup(t)
	effects := filepath.Join(t.TempDir(), "effects")
	doomed := startProcess(t, processConfig{Role: "worker", APIURL: s.apiURL, Token: "team-a:operator", ID: "doomed", Effects: effects, Block: true})
	run := handlerRun("team-a", "a-job", "a.work", time.Now())
	s.produce(run)
	require.Eventually(t, func() bool { return len(effectLines(t, effects, "started")[run.GetRunId()]) > 0 },
		waitFor, 50*time.Millisecond, "the doomed worker process never started the run")
	doomed.kill()
	startProcess(t, processConfig{Role: "worker", APIURL: s.apiURL, Token: "team-a:operator", ID: "heir", Effects: effects})

	s.events.waitState(t, run.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
	require.Equal(t, []string{"heir replay=true"}, effectLines(t, effects, "effect")[run.GetRunId()], "the run's effect, where and as what")
	var lost bool
	for _, ev := range s.events.of(run.GetRunId()) {
		lost = lost || ev.GetError().GetCode() == gateway.CodeWorkerLost
	}
	require.True(t, lost, "no attempt failed as worker_lost")
}

// freeAddr is a loopback address no one listens on, for a process that
// must come back on the same one.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestGatewayProcessKilledWhileWorkersHoldTasks: the process of the
// gateway and its API is SIGKILLed while two workers hold every run's
// task, and started again: every run succeeds once, and its effect is
// applied once (the workers stop the attempts they held when the gateway
// stops answering, and the runs come back when the dead gateway's leases
// expire).
func TestGatewayProcessKilledWhileWorkersHoldTasks(t *testing.T) {
	t.Parallel()
	s := setupWith(t, stackOpts{noGateway: true})
	gwCfg := processConfig{Role: "gateway", ID: "gateway-1", Brokers: s.kafka.Brokers, TopicPrefix: s.kafka.TopicPrefix,
		RedisAddr: s.redisAddr, RedisPrefix: s.redisKeys, Addr: freeAddr(t)}
	gw := startProcess(t, gwCfg)
	s.apiURL = "http://" + gwCfg.Addr

	var mu sync.Mutex
	held, effects := map[string]int{}, map[string][]string{}
	handler := func(id string) worker.Handler {
		return func(ctx context.Context, r *worker.Run) error {
			mu.Lock()
			first := held[r.ID] == 0
			held[r.ID]++
			if !first {
				effects[r.ID] = append(effects[r.ID], id)
			}
			mu.Unlock()
			if first { // held until the gateway is gone
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
	}
	s.startWorker("w-1", "team-a", nil, map[string]worker.Handler{"a.work": handler("w-1")})
	s.startWorker("w-2", "team-a", nil, map[string]worker.Handler{"a.work": handler("w-2")})
	due := time.Now()
	var runs []*sundialv1.Run
	for i := range 6 {
		runs = append(runs, handlerRun("team-a", fmt.Sprintf("a-job-%d", i), "a.work", due))
	}
	s.produce(runs...)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) == len(runs)
	}, waitFor, 50*time.Millisecond, "the workers never held every run")

	gw.kill()
	startProcess(t, gwCfg)

	for _, r := range runs {
		s.events.waitState(t, r.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range runs {
		require.Len(t, effects[r.GetRunId()], 1, "run %s: effects on %v", r.GetRunId(), effects[r.GetRunId()])
		succeeded := 0
		for _, ev := range s.events.of(r.GetRunId()) {
			if ev.GetState() == sundialv1.RunState_RUN_STATE_SUCCEEDED {
				succeeded++
			}
		}
		require.Equal(t, 1, succeeded, "run %s succeeded %d times", r.GetRunId(), succeeded)
	}
}
