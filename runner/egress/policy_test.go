package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseIPReadsEverySpelling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host string
		want string // "" for a host name
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"169.254.43518", "169.254.169.254"},
		{"[::1]", "::1"},
		{"[::ffff:127.0.0.1]", "::ffff:127.0.0.1"},
		{"[fe80::1%eth0]", "fe80::1%eth0"},
		{"127.0.0.1.", "127.0.0.1"},
		{"example.com", ""},
		{"cafe.be", ""},
		{"1.2.3.4.5", ""},
		{"256.1.1.1", ""},
		{"08.1.1.1", ""},
		{"4294967296", ""},
	} {
		t.Run(tc.host, func(t *testing.T) {
			t.Parallel()
			ip, ok := ParseIP(tc.host)
			if tc.want == "" {
				assert.False(t, ok, "a host name, got %s", ip)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.want, ip.String())
		})
	}
}

func TestClassifyRefusesPrivateRangesInEveryForm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ip   string
		want string
	}{
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::127.0.0.1", "loopback"},
		{"64:ff9b::7f00:1", "loopback"},
		{"2002:7f00:1::", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"::ffff:10.0.0.1", "private"},
		{"169.254.169.254", "link-local"},
		{"::ffff:169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"100.64.0.1", "shared address space (CGNAT)"},
		{"255.255.255.255", "reserved"},
		{"8.8.8.8", ""},
		{"172.32.0.1", ""},
		{"2001:4860:4860::8888", ""},
		{"::ffff:8.8.8.8", ""},
	} {
		t.Run(tc.ip, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, Classify(netip.MustParseAddr(tc.ip)))
		})
	}
}

func mustRules(t *testing.T, parse func(string) (Rules, error), items ...string) Rules {
	t.Helper()
	var r Rules
	for _, it := range items {
		x, err := parse(it)
		require.NoError(t, err, it)
		r = r.merge(x)
	}
	return r
}

func TestCheckAddrAdmitsOnlyWhatTheTeamIsAllowed(t *testing.T) {
	t.Parallel()
	p, err := New(Config{
		Teams: map[string]Rules{
			"payments": mustRules(t, ParseHTTPRule, "10.1.0.0/16", "api.internal:443", "*.svc.internal"),
			"ops":      mustRules(t, ParseHTTPRule, "127.0.0.1:8080"),
		},
		Pools: map[string]Rules{"batch": mustRules(t, ParseHTTPRule, "192.168.7.0/24")},
		Pool:  "batch",
		Own:   []netip.AddrPort{netip.MustParseAddrPort("10.1.0.5:9092"), netip.MustParseAddrPort("127.0.0.1:9465")},
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		name       string
		team, host string
		addr       string
		want       string // "" admitted, else the reason
	}{
		{"a public address is admitted to anyone", "ops", "", "8.8.8.8:443", ""},
		{"loopback is refused by default", "payments", "", "127.0.0.1:80", "loopback"},
		{"the metadata address is refused", "payments", "", "169.254.169.254:80", "link-local"},
		{"a team's range admits its addresses", "payments", "", "10.1.2.3:80", ""},
		{"a team's range admits the mapped form too", "payments", "", "[::ffff:10.1.2.3]:80", ""},
		{"another team's range does not", "ops", "", "10.1.2.3:80", "private"},
		{"an allowed host admits what it resolves to on its port", "payments", "api.internal", "10.9.9.9:443", ""},
		{"an allowed host admits no other port", "payments", "api.internal", "10.9.9.9:80", "private"},
		{"a wildcard host admits the names below it", "payments", "a.svc.internal", "10.9.9.9:80", ""},
		{"a wildcard host does not admit its own name", "payments", "svc.internal", "10.9.9.9:80", "private"},
		{"a host allow is matched case-insensitively", "payments", "API.internal.", "10.9.9.9:443", ""},
		{"an address with a port admits that port only", "ops", "", "127.0.0.1:8081", "loopback"},
		{"an address with a port admits that port", "ops", "", "127.0.0.1:8080", ""},
		{"the runner's pool range admits every team", "ops", "", "192.168.7.7:80", ""},
		{"the installation's own address is refused even when allowed", "payments", "", "10.1.0.5:9092", "one of this installation's own addresses"},
		{"its own metrics address too", "ops", "", "127.0.0.1:9465", "one of this installation's own addresses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ap := netip.MustParseAddrPort(tc.addr)
			err := p.CheckAddr(tc.team, tc.host, ap.Addr(), ap.Port())
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			var r *Refusal
			require.ErrorAs(t, err, &r)
			assert.Equal(t, tc.want, r.Reason)
			assert.Equal(t, tc.team, r.Team)
		})
	}
}

func TestRefusalNamesTheAddressAndTheTeam(t *testing.T) {
	t.Parallel()
	err := (*Policy)(nil).CheckAddr("payments", "", netip.MustParseAddr("::ffff:127.0.0.1"), 80)
	assert.EqualError(t, err, "egress: 127.0.0.1 is loopback, not allowed for team payments")
}

func TestCheckTopic(t *testing.T) {
	t.Parallel()
	p, err := New(Config{
		TopicPrefix: "prod.",
		Teams: map[string]Rules{
			"payments": mustRules(t, ParseTopicRule, "ledger.in", "shared.payments.*"),
			EveryTeam:  mustRules(t, ParseTopicRule, "public.*"),
		},
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		name        string
		team, topic string
		want        string
	}{
		{"a team's own topics are admitted", "payments", "payments.events", ""},
		{"another team's are not", "ops", "payments.events", "start with"},
		{"an exact allow admits its topic", "payments", "ledger.in", ""},
		{"an exact allow admits no other", "payments", "ledger.in2", "start with"},
		{"a prefix allow admits what it starts", "payments", "shared.payments.x", ""},
		{"an allow for every team admits for any", "ops", "public.news", ""},
		{"Kafka's internal topics are never a target", "payments", "__consumer_offsets", "a Kafka internal topic"},
		{"the installation's own topics are never a target", "payments", "prod.sundial.jobs.ops", "one of Sundial's own topics"},
		{"unprefixed Sundial topics are never a target", "payments", "sundial.runs.default", "one of Sundial's own topics"},
		{"a team named like Sundial gets no own topics", "sundial", "sundial.jobs", "one of Sundial's own topics"},
		{"a job without a team gets only what is allowed to all", "", "public.x", ""},
		{"a job without a team gets no own topics", "", ".x", "start with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := p.CheckTopic(tc.team, tc.topic)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			var r *Refusal
			require.ErrorAs(t, err, &r)
			assert.Contains(t, r.Reason+r.Hint, tc.want)
		})
	}
}

func TestCheckExecIsPerTeamAndPool(t *testing.T) {
	t.Parallel()
	p, err := New(Config{
		Teams: map[string]Rules{"ops": {Exec: []string{"rsync"}}, EveryTeam: {Exec: []string{"report"}}},
		Pools: map[string]Rules{"batch": {Exec: []string{"etl"}}, "other": {Exec: []string{"gpu"}}},
		Pool:  "batch",
	})
	require.NoError(t, err)
	assert.NoError(t, p.CheckExec("ops", "rsync"))
	assert.Error(t, p.CheckExec("payments", "rsync"), "allowed to ops only")
	assert.NoError(t, p.CheckExec("payments", "report"), "allowed to every team")
	assert.NoError(t, p.CheckExec("payments", "etl"), "allowed on this runner's pool")
	assert.Error(t, p.CheckExec("payments", "gpu"), "allowed on another pool")
	assert.Equal(t, []string{"etl", "gpu", "report", "rsync"}, p.ExecNames())
}

func TestParseEntriesKeepsTheScope(t *testing.T) {
	t.Parallel()
	var cfg Config
	err := ParseEntries("--egress-allow", []string{"127.0.0.0/8", "team=payments:10.1.0.0/16", "api.internal:443", "pool=batch:[fd00::/8]:8443", "team=ops:*.svc"},
		func(s Scope, item string) error {
			r, err := ParseHTTPRule(item)
			cfg.Add(s, r)
			return err
		})
	require.NoError(t, err)
	assert.Equal(t, Config{
		Teams: map[string]Rules{
			EveryTeam:  {Nets: []NetRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}},
			"payments": {Nets: []NetRule{{Prefix: netip.MustParsePrefix("10.1.0.0/16")}}, Hosts: []HostRule{{Name: "api.internal", Port: 443}}},
			"ops":      {Hosts: []HostRule{{Name: "*.svc"}}},
		},
		Pools: map[string]Rules{"batch": {Nets: []NetRule{{Prefix: netip.MustParsePrefix("fd00::/8"), Port: 8443}}}},
	}, cfg)

	err = ParseEntries("--egress-allow", []string{"team=:x", "team=a:", "0177.0.0.1", "10.0.0.0/33", "a:99999", "Bad_Host*"},
		func(_ Scope, item string) error { _, err := ParseHTTPRule(item); return err })
	require.Error(t, err)
	for _, want := range []string{`"team=:x": want team=NAME:ITEM`, `"team=a:": an empty item`, `write an address in standard form`, `not an address range`, `port "99999"`, `"Bad_Host*"`} {
		assert.Contains(t, err.Error(), want)
	}
}

// fakeResolver answers every name with addrs.
type fakeResolver []netip.Addr

func (f fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return f, nil
}

func TestDialerRefusesBeforeDialling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		addr string
		dns  fakeResolver
	}{
		{"a decimal address", "2130706433:80", nil},
		{"an octal address", "0177.0.0.1:80", nil},
		{"a short address", "127.1:80", nil},
		{"a mapped address", "[::ffff:127.0.0.1]:80", nil},
		{"a name resolving to loopback", "localtest.example:80", fakeResolver{netip.MustParseAddr("127.0.0.1")}},
		{"a name resolving to a public and a private address", "mixed.example:80", fakeResolver{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("10.0.0.1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := &Dialer{Team: "payments", Resolver: tc.dns}
			_, err := d.DialContext(context.Background(), "tcp", tc.addr)
			var r *Refusal
			require.ErrorAs(t, err, &r)
			var op *net.OpError
			assert.False(t, errors.As(err, &op), "refused before any connect")
		})
	}
}
