package target

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/egress"
)

// loopbackHTTP is an HTTP target whose policy lets every team reach the
// loopback addresses test servers listen on.
func loopbackHTTP(t *testing.T) *HTTP {
	t.Helper()
	return &HTTP{Egress: policy(t, egress.EveryTeam, "127.0.0.0/8", "::1")}
}

// policy allows team the HTTP items.
func policy(t *testing.T, team string, items ...string) *egress.Policy {
	t.Helper()
	var cfg egress.Config
	for _, it := range items {
		r, err := egress.ParseHTTPRule(it)
		require.NoError(t, err)
		cfg.Add(egress.Scope{Team: team}, r)
	}
	p, err := egress.New(cfg)
	require.NoError(t, err)
	return p
}

// allowTopics allows every team the topics.
func allowTopics(t *testing.T, topics ...string) *egress.Policy {
	t.Helper()
	var cfg egress.Config
	for _, it := range topics {
		r, err := egress.ParseTopicRule(it)
		require.NoError(t, err)
		cfg.Add(egress.Scope{Team: egress.EveryTeam}, r)
	}
	p, err := egress.New(cfg)
	require.NoError(t, err)
	return p
}

func teamRun(team, url string) *sundialv1.Run {
	r := httpRun(url, nil)
	r.OwnerTeam = team
	return r
}

// counted is a test server that counts the requests it is sent.
func counted(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func requireRefused(t *testing.T, err error) *Error {
	t.Helper()
	var te *Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, CodeEgressRefused, te.Code, "%v", err)
	assert.False(t, te.Retryable, "a refusal can never succeed")
	return te
}

func TestHTTPTargetCannotReachLoopbackOrMetadata(t *testing.T) {
	t.Parallel()
	victim, hits := counted(t, nil)
	port := victim.URL[strings.LastIndex(victim.URL, ":")+1:]
	// allowed is a server the team may call; it redirects to the victim,
	// on another loopback port that is not allowed.
	allowed, _ := counted(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, victim.URL+"/after-redirect", http.StatusFound)
	})
	allowedAddr := strings.TrimPrefix(allowed.URL, "http://")
	h := &HTTP{Egress: policy(t, "payments", allowedAddr)}

	for _, u := range []string{
		"http://127.0.0.1:" + port + "/",
		"http://2130706433:" + port + "/",
		"http://0177.0.0.1:" + port + "/",
		"http://0x7f000001:" + port + "/",
		"http://127.1:" + port + "/",
		"http://[::ffff:127.0.0.1]:" + port + "/",
		"http://[::1]:" + port + "/",
		"http://localhost:" + port + "/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/latest/meta-data/",
		"http://0.0.0.0:" + port + "/",
		"http://10.0.0.1:" + port + "/",
		allowed.URL + "/redirects-to-the-victim",
	} {
		t.Run(u, func(t *testing.T) {
			err := (&Targets{HTTP: h}).Execute(context.Background(), Request{Run: teamRun("payments", u)})
			te := requireRefused(t, err)
			assert.Contains(t, te.Message, "not allowed for team payments")
		})
	}
	assert.Zero(t, hits.Load(), "the victim was never reached")
}

func TestHTTPRefusalDoesNotEchoTheURL(t *testing.T) {
	t.Parallel()
	err := (&Targets{HTTP: &HTTP{}}).Execute(context.Background(), Request{Run: teamRun("payments", "http://user:pa55@127.0.0.1:9/x?token=s3cret")})
	te := requireRefused(t, err)
	assert.Equal(t, "egress_refused: egress: 127.0.0.1 is loopback, not allowed for team payments", te.Error())
}

func TestEgressAllowListAdmitsTeamRanges(t *testing.T) {
	t.Parallel()
	srv, hits := counted(t, nil)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	h := &HTTP{Egress: policy(t, "payments", "127.0.0.0/8")}
	targets := &Targets{HTTP: h}
	t.Cleanup(h.CloseIdleConnections)

	require.NoError(t, targets.Execute(context.Background(), Request{Run: teamRun("payments", srv.URL+"/a")}), "payments may call its range")
	require.EqualValues(t, 1, hits.Load())
	// payments' connection is idle in its transport now: another team's
	// call to the same address must not reuse it.
	requireRefused(t, targets.Execute(context.Background(), Request{Run: teamRun("ops", srv.URL+"/b")}))
	requireRefused(t, targets.Execute(context.Background(), Request{Run: teamRun("ops", "http://localhost:"+u.Port()+"/c")}))
	assert.EqualValues(t, 1, hits.Load(), "ops never reached the server")
	require.NoError(t, targets.Execute(context.Background(), Request{Run: teamRun("payments", "http://2130706433:"+u.Port()+"/d")}), "any spelling of an allowed address is allowed")
	assert.EqualValues(t, 2, hits.Load())
}

func TestHTTPRedirectsAreBounded(t *testing.T) {
	t.Parallel()
	var srv *httptest.Server
	srv, _ = counted(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+r.URL.Path+"x", http.StatusFound)
	})
	h := loopbackHTTP(t)
	t.Cleanup(h.CloseIdleConnections)
	err := (&Targets{HTTP: h}).Execute(context.Background(), Request{Run: teamRun("payments", srv.URL+"/")})
	var te *Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, CodeRedirect, te.Code)
	assert.False(t, te.Retryable)
}

func TestKafkaAndExecTargetsFollowThePolicy(t *testing.T) {
	t.Parallel()
	targets := &Targets{Kafka: &Kafka{}, Exec: &Exec{cfg: ExecConfig{Allowed: map[string]string{"rsync": "/usr/bin/rsync"}}}}
	kafkaRun := func(team, topic string) *sundialv1.Run {
		return &sundialv1.Run{OwnerTeam: team, Target: &sundialv1.Target{Kind: &sundialv1.Target_Kafka{Kafka: &sundialv1.KafkaTarget{Topic: topic}}}}
	}
	for _, topic := range []string{"__consumer_offsets", "sundial.jobs.ops", "ops.events"} {
		requireRefused(t, targets.Execute(context.Background(), Request{Run: kafkaRun("payments", topic)}))
	}
	err := targets.Execute(context.Background(), Request{Run: &sundialv1.Run{OwnerTeam: "payments",
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Exec{Exec: &sundialv1.ExecTarget{Command: "rsync"}}}}})
	var te *Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, CodeExecNotAllowed, te.Code)
	assert.Contains(t, te.Message, "not allowed for team payments")
}

func TestPooledTransportUsesNoProxyAndTheEgressDialer(t *testing.T) {
	t.Parallel()
	called := false
	dial := func(context.Context, string, string) (net.Conn, error) {
		called = true
		return nil, errors.New("refused by the test")
	}
	tr, ok := PooledTransport(8)(dial).(*http.Transport)
	require.True(t, ok)
	assert.Nil(t, tr.Proxy, "a proxy from the environment would connect to addresses the policy never sees")
	assert.Equal(t, 8, tr.MaxIdleConnsPerHost)
	_, _ = tr.DialContext(context.Background(), "tcp", "example.com:80")
	assert.True(t, called, "connections are dialled by the egress dialer")
}
